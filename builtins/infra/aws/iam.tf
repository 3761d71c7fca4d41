# Podmin <https://podmin.dev>
# Copyright The Podmin Authors
# SPDX-License-Identifier: Apache-2.0

data "aws_caller_identity" "current" {}

data "aws_partition" "current" {}

locals {
  bucket_arn     = "arn:${data.aws_partition.current.partition}:s3:::${var.bucket}"
  account_id     = data.aws_caller_identity.current.account_id
  parameters_arn = "arn:${data.aws_partition.current.partition}:ssm:${var.region}:${local.account_id}:parameter/${var.cluster}/*"
  # Secrets Manager appends six random characters to a secret's ARN.
  secrets_arn = "arn:${data.aws_partition.current.partition}:secretsmanager:${var.region}:${local.account_id}:secret:/${var.cluster}/*"
  # The exact S3 object of the log exporter's server CA bundle ([bucket,
  # key]), or null; the canonical --otel-logs value never holds a comma
  # inside a setting.
  otel_logs_ca = try(regex("(?:^|,)ca=s3://([^/,]+)/([^,]+)", var.otel_logs), null)

  # Only this cluster's own resources, by the tag every one of them carries.
  own_resources = { StringEquals = { "aws:ResourceTag/podmin:cluster" = var.cluster } }

  # Every AWS API a node calls: aws.sh at boot (the Pod prefix, the
  # dependency sync) and the agent (the bucket, Parameter Store, Secrets
  # Manager). A test derives the calls from both and checks them here.
  node_policy = {
    Version = "2012-10-17"
    Statement = concat([
      {
        Sid      = "ReadImagesAndDependencies"
        Effect   = "Allow"
        Action   = ["s3:GetObject"]
        Resource = ["${local.bucket_arn}/apps/*", "${local.bucket_arn}/mirror/*", "${local.bucket_arn}/dependencies/*"]
      },
      {
        Sid      = "ReadDesiredState"
        Effect   = "Allow"
        Action   = ["s3:GetObject"]
        Resource = ["${local.bucket_arn}/deployments/*", "${local.bucket_arn}/nodegroups/*", "${local.bucket_arn}/services/*", "${local.bucket_arn}/tfstate/podmin.auto.tfvars.json"]
      },
      {
        Sid      = "Coordination"
        Effect   = "Allow"
        Action   = ["s3:GetObject", "s3:PutObject"]
        Resource = ["${local.bucket_arn}/dns/*", "${local.bucket_arn}/identity/*"]
      },
      {
        # The leader rewrites the derived NodeGroup views, never the index
        # or a payload; the streaming write it uses aborts a multipart
        # upload it could not complete.
        Sid      = "NodeGroupViews"
        Effect   = "Allow"
        Action   = ["s3:PutObject", "s3:AbortMultipartUpload"]
        Resource = ["${local.bucket_arn}/deployments/nodegroups/*"]
      },
      {
        # The elected agent publishes each NodeGroup's observed state
        # (podmin status, deploy --wait), reading it back to fence a
        # superseded leader.
        Sid      = "NodeGroupStatus"
        Effect   = "Allow"
        Action   = ["s3:GetObject", "s3:PutObject"]
        Resource = ["${local.bucket_arn}/status/nodegroups/*"]
      },
      {
        # Bootstrap syncs dependencies/; the agent asks HeadBucket when the
        # deployment index is absent, and only with ListBucket does S3
        # answer a missing object with 404 rather than 403, so an absent
        # index reads as empty desired state. Key names hold no secret.
        Sid      = "ListBucket"
        Effect   = "Allow"
        Action   = ["s3:ListBucket"]
        Resource = [local.bucket_arn]
      },
      {
        Sid      = "ClusterParameters"
        Effect   = "Allow"
        Action   = ["ssm:GetParameter"]
        Resource = [local.parameters_arn]
      },
      {
        Sid      = "ClusterSecrets"
        Effect   = "Allow"
        Action   = ["secretsmanager:GetSecretValue"]
        Resource = [local.secrets_arn]
      },
      {
        # Bootstrap delegates the /80 Pod prefix to the VM's own secondary
        # ENI, which the launch template tags for this cluster.
        Sid       = "PodPrefix"
        Effect    = "Allow"
        Action    = ["ec2:AssignIpv6Addresses"]
        Resource  = ["arn:${data.aws_partition.current.partition}:ec2:${var.region}:${local.account_id}:network-interface/*"]
        Condition = local.own_resources
      },
      ], var.workload_ca_publish == null ? [] : [
      {
        Sid      = "WorkloadCAPublish"
        Effect   = "Allow"
        Action   = ["s3:GetObject", "s3:PutObject"]
        Resource = ["arn:${data.aws_partition.current.partition}:s3:::${var.workload_ca_publish.bucket}/${var.workload_ca_publish.key}"]
      },
      ], local.otel_logs_ca == null ? [] : [
      {
        Sid      = "OtelLogsCA"
        Effect   = "Allow"
        Action   = ["s3:GetObject"]
        Resource = ["arn:${data.aws_partition.current.partition}:s3:::${local.otel_logs_ca[0]}/${local.otel_logs_ca[1]}"]
      },
    ])
  }

  assume_ec2 = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Effect    = "Allow"
      Action    = ["sts:AssumeRole"]
      Principal = { Service = "ec2.amazonaws.com" }
    }]
  })
}

resource "aws_iam_role" "node" {
  name_prefix        = "podmin-${var.cluster}-node-"
  assume_role_policy = local.assume_ec2
  tags               = local.tags
}

resource "aws_iam_role_policy" "node" {
  name   = "podmin-node"
  role   = aws_iam_role.node.id
  policy = jsonencode(local.node_policy)
}

resource "aws_iam_role_policy_attachment" "node_ssm" {
  role       = aws_iam_role.node.name
  policy_arn = "arn:${data.aws_partition.current.partition}:iam::aws:policy/AmazonSSMManagedInstanceCore"
}

resource "aws_iam_instance_profile" "node" {
  name_prefix = "podmin-${var.cluster}-node-"
  role        = aws_iam_role.node.name
  tags        = local.tags
}

# NAT64 instances move their stable data ENI and complete their lifecycle
# hook; they read only the mirrored Jool archives.
resource "aws_iam_role" "nat64" {
  count              = length(var.nat64) > 0 ? 1 : 0
  name_prefix        = "podmin-${var.cluster}-nat64-"
  assume_role_policy = local.assume_ec2
  tags               = local.tags
}

locals {
  nat64_policy = {
    Version = "2012-10-17"
    Statement = [
      {
        Sid       = "MoveStableENI"
        Effect    = "Allow"
        Action    = ["ec2:AttachNetworkInterface", "ec2:DetachNetworkInterface"]
        Resource  = ["*"]
        Condition = local.own_resources
      },
      {
        Sid      = "StableENIGeneration"
        Effect   = "Allow"
        Action   = ["ec2:CreateTags"]
        Resource = ["*"]
        Condition = merge(local.own_resources, {
          "ForAllValues:StringEquals" = { "aws:TagKeys" = ["podmin:nat64-generation"] }
        })
      },
      {
        Sid      = "Describe"
        Effect   = "Allow"
        Action   = ["ec2:DescribeNetworkInterfaces", "ec2:DescribeInstances"]
        Resource = ["*"]
      },
      {
        Sid       = "LifecycleHook"
        Effect    = "Allow"
        Action    = ["autoscaling:CompleteLifecycleAction"]
        Resource  = ["*"]
        Condition = local.own_resources
      },
      {
        Sid      = "JoolArchives"
        Effect   = "Allow"
        Action   = ["s3:GetObject"]
        Resource = ["${local.bucket_arn}/dependencies/jool/*"]
      },
    ]
  }
}

resource "aws_iam_role_policy" "nat64" {
  count  = length(var.nat64) > 0 ? 1 : 0
  name   = "podmin-nat64"
  role   = aws_iam_role.nat64[0].id
  policy = jsonencode(local.nat64_policy)
}

resource "aws_iam_role_policy_attachment" "nat64_ssm" {
  count      = length(var.nat64) > 0 ? 1 : 0
  role       = aws_iam_role.nat64[0].name
  policy_arn = "arn:${data.aws_partition.current.partition}:iam::aws:policy/AmazonSSMManagedInstanceCore"
}

resource "aws_iam_instance_profile" "nat64" {
  count       = length(var.nat64) > 0 ? 1 : 0
  name_prefix = "podmin-${var.cluster}-nat64-"
  role        = aws_iam_role.nat64[0].name
  tags        = local.tags
}
