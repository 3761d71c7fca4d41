# Podmin <https://podmin.dev>
# Copyright The Podmin Authors
# SPDX-License-Identifier: Apache-2.0

data "aws_caller_identity" "current" {}

data "aws_partition" "current" {}

locals {
  bucket_arn     = "arn:${data.aws_partition.current.partition}:s3:::${var.bucket}"
  parameters_arn = "arn:${data.aws_partition.current.partition}:ssm:${var.region}:${data.aws_caller_identity.current.account_id}:parameter/${var.cluster}/*"
  # The exact S3 object of the log exporter's server CA bundle ([bucket,
  # key]), or null; the canonical --otel-logs value never holds a comma
  # inside a setting.
  otel_logs_ca = try(regex("(?:^|,)ca=s3://([^/,]+)/([^,]+)", var.otel_logs), null)
}

data "aws_iam_policy_document" "assume_ec2" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["ec2.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "node" {
  name_prefix        = "podmin-${var.cluster}-node-"
  assume_role_policy = data.aws_iam_policy_document.assume_ec2.json
  tags               = local.tags
}

data "aws_iam_policy_document" "node" {
  statement {
    sid       = "ReadImagesAndDependencies"
    actions   = ["s3:GetObject"]
    resources = ["${local.bucket_arn}/apps/*", "${local.bucket_arn}/mirror/*", "${local.bucket_arn}/dependencies/*"]
  }
  statement {
    sid       = "ReadDesiredState"
    actions   = ["s3:GetObject"]
    resources = ["${local.bucket_arn}/deployments/*", "${local.bucket_arn}/nodegroups/*", "${local.bucket_arn}/services/*", "${local.bucket_arn}/tfstate/podmin.auto.tfvars.json"]
  }
  statement {
    sid       = "Coordination"
    actions   = ["s3:GetObject", "s3:PutObject"]
    resources = ["${local.bucket_arn}/dns/*", "${local.bucket_arn}/identity/*"]
  }
  statement {
    sid       = "ListDependencies"
    actions   = ["s3:ListBucket"]
    resources = [local.bucket_arn]
    condition {
      test     = "StringLike"
      variable = "s3:prefix"
      values   = ["dependencies/*", "apps/*", "mirror/*"]
    }
  }
  statement {
    sid       = "ClusterParameters"
    actions   = ["ssm:GetParameter", "ssm:GetParameters", "ssm:GetParametersByPath"]
    resources = [local.parameters_arn]
  }
  dynamic "statement" {
    for_each = var.workload_ca_publish == null ? [] : [var.workload_ca_publish]
    content {
      sid       = "WorkloadCAPublish"
      actions   = ["s3:GetObject", "s3:PutObject"]
      resources = ["arn:${data.aws_partition.current.partition}:s3:::${statement.value.bucket}/${statement.value.key}"]
    }
  }
  dynamic "statement" {
    for_each = local.otel_logs_ca == null ? [] : [local.otel_logs_ca]
    content {
      sid       = "OtelLogsCA"
      actions   = ["s3:GetObject"]
      resources = ["arn:${data.aws_partition.current.partition}:s3:::${statement.value[0]}/${statement.value[1]}"]
    }
  }
}

resource "aws_iam_role_policy" "node" {
  name   = "podmin-node"
  role   = aws_iam_role.node.id
  policy = data.aws_iam_policy_document.node.json
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
  assume_role_policy = data.aws_iam_policy_document.assume_ec2.json
  tags               = local.tags
}

data "aws_iam_policy_document" "nat64" {
  statement {
    sid       = "MoveStableENI"
    actions   = ["ec2:AttachNetworkInterface", "ec2:DetachNetworkInterface"]
    resources = ["*"]
    condition {
      test     = "StringEquals"
      variable = "aws:ResourceTag/podmin:cluster"
      values   = [var.cluster]
    }
  }
  statement {
    sid       = "StableENIGeneration"
    actions   = ["ec2:CreateTags"]
    resources = ["*"]
    condition {
      test     = "StringEquals"
      variable = "aws:ResourceTag/podmin:cluster"
      values   = [var.cluster]
    }
    condition {
      test     = "ForAllValues:StringEquals"
      variable = "aws:TagKeys"
      values   = ["podmin:nat64-generation"]
    }
  }
  statement {
    sid       = "Describe"
    actions   = ["ec2:DescribeNetworkInterfaces", "ec2:DescribeInstances"]
    resources = ["*"]
  }
  statement {
    sid       = "LifecycleHook"
    actions   = ["autoscaling:CompleteLifecycleAction"]
    resources = ["*"]
    condition {
      test     = "StringEquals"
      variable = "aws:ResourceTag/podmin:cluster"
      values   = [var.cluster]
    }
  }
  statement {
    sid       = "JoolArchives"
    actions   = ["s3:GetObject"]
    resources = ["${local.bucket_arn}/dependencies/jool/*"]
  }
}

resource "aws_iam_role_policy" "nat64" {
  count  = length(var.nat64) > 0 ? 1 : 0
  name   = "podmin-nat64"
  role   = aws_iam_role.nat64[0].id
  policy = data.aws_iam_policy_document.nat64.json
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
