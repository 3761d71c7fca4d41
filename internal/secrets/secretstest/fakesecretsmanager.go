// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package secretstest

import (
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FakeSecretsManager is an in-process AWS Secrets Manager speaking AWS JSON
// 1.1 (X-Amz-Target: secretsmanager.<Operation>). It implements
// CreateSecret, PutSecretValue, GetSecretValue, DescribeSecret, ListSecrets
// (name filter, IncludePlannedDeletion, NextToken paging), DeleteSecret
// (recovery window or forced) and RestoreSecret, with the service's error
// codes and its 64 KiB value limit.
type FakeSecretsManager struct {
	fakeService
	// PageSize bounds ListSecrets pages; small values exercise paging.
	PageSize int
	secrets  map[string]*fakeSecret
	kms      map[string]bool // names whose decryption fails
}

type fakeSecret struct {
	str      *string
	bin      []byte
	version  int
	created  time.Time
	changed  time.Time
	deletion time.Time // zero unless scheduled for deletion
}

// NewFakeSecretsManager starts a fake that is closed when the test ends.
func NewFakeSecretsManager(t testing.TB) *FakeSecretsManager {
	f := &FakeSecretsManager{PageSize: 3, secrets: map[string]*fakeSecret{}, kms: map[string]bool{}}
	f.prefix = "secretsmanager."
	f.ops = map[string]func([]byte) (any, *awsError){
		"CreateSecret":   f.createSecret,
		"PutSecretValue": f.putSecretValue,
		"GetSecretValue": f.getSecretValue,
		"DescribeSecret": f.describeSecret,
		"ListSecrets":    f.listSecrets,
		"DeleteSecret":   f.deleteSecret,
		"RestoreSecret":  f.restoreSecret,
	}
	f.start(t)
	return f
}

// BreakKMS makes GetSecretValue of name fail with DecryptionFailure.
func (f *FakeSecretsManager) BreakKMS(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.kms[name] = true
}

// IsBinary reports whether the current version of name is SecretBinary.
func (f *FakeSecretsManager) IsBinary(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.secrets[name]
	return s != nil && s.bin != nil
}

func arn(name string) string {
	return "arn:aws:secretsmanager:us-east-1:123456789012:secret:" + name + "-AbCdEf"
}

var (
	errNotFound = func() *awsError {
		return errorf("ResourceNotFoundException", "Secrets Manager can't find the specified secret.")
	}
	errMarked = func() *awsError {
		return errorf("InvalidRequestException", "You can't perform this operation on the secret because it was marked for deletion.")
	}
)

// secretValue is the value part of CreateSecret and PutSecretValue.
type secretValue struct {
	Name, SecretId string
	SecretString   *string
	SecretBinary   []byte // base64 on the wire, as encoding/json does
}

func (v *secretValue) check() *awsError {
	switch {
	case v.SecretString != nil && v.SecretBinary != nil:
		return errorf("InvalidParameterException", "You can't specify both a binary secret value and a string secret value in the same secret.")
	case v.SecretString != nil && len(*v.SecretString) > 65536, len(v.SecretBinary) > 65536:
		return errorf("ValidationException", "1 validation error detected: Value at 'secretString' failed to satisfy constraint: Member must have length less than or equal to 65536")
	}
	return nil
}

func (f *FakeSecretsManager) set(s *fakeSecret, v *secretValue) string {
	s.str, s.bin = v.SecretString, v.SecretBinary
	s.version++
	s.changed = f.now()
	return "v" + strconv.Itoa(s.version)
}

func (f *FakeSecretsManager) createSecret(body []byte) (any, *awsError) {
	var in secretValue
	if aerr := decode(body, &in); aerr != nil {
		return nil, aerr
	}
	if in.Name == "" || len(in.Name) > 512 {
		return nil, errorf("ValidationException", "1 validation error detected: Value at 'name' failed to satisfy constraint: Member must have length between 1 and 512")
	}
	if aerr := in.check(); aerr != nil {
		return nil, aerr
	}
	if s := f.secrets[in.Name]; s != nil {
		if !s.deletion.IsZero() {
			return nil, errorf("InvalidRequestException", "You can't create this secret because a secret with this name is already scheduled for deletion.")
		}
		return nil, errorf("ResourceExistsException", "The operation failed because the secret %s already exists.", in.Name)
	}
	s := &fakeSecret{created: f.now()}
	f.secrets[in.Name] = s
	version := ""
	if in.SecretString != nil || in.SecretBinary != nil {
		version = f.set(s, &in)
	}
	return map[string]any{"ARN": arn(in.Name), "Name": in.Name, "VersionId": version}, nil
}

// lookup finds a live secret by SecretId.
func (f *FakeSecretsManager) lookup(id string) (*fakeSecret, *awsError) {
	s := f.secrets[id]
	if s == nil {
		return nil, errNotFound()
	}
	if !s.deletion.IsZero() {
		return nil, errMarked()
	}
	return s, nil
}

func (f *FakeSecretsManager) putSecretValue(body []byte) (any, *awsError) {
	var in secretValue
	if aerr := decode(body, &in); aerr != nil {
		return nil, aerr
	}
	if aerr := in.check(); aerr != nil {
		return nil, aerr
	}
	s, aerr := f.lookup(in.SecretId)
	if aerr != nil {
		return nil, aerr
	}
	version := f.set(s, &in)
	return map[string]any{"ARN": arn(in.SecretId), "Name": in.SecretId, "VersionId": version, "VersionStages": []string{"AWSCURRENT"}}, nil
}

func (f *FakeSecretsManager) getSecretValue(body []byte) (any, *awsError) {
	var in struct{ SecretId string }
	if aerr := decode(body, &in); aerr != nil {
		return nil, aerr
	}
	s, aerr := f.lookup(in.SecretId)
	if aerr != nil {
		return nil, aerr
	}
	if f.kms[in.SecretId] {
		return nil, errorf("DecryptionFailure", "Secrets Manager can't decrypt the protected secret text using the provided KMS key.")
	}
	if s.version == 0 {
		return nil, errorf("ResourceNotFoundException", "Secrets Manager can't find the specified secret value for staging label: AWSCURRENT")
	}
	out := map[string]any{"ARN": arn(in.SecretId), "Name": in.SecretId, "VersionId": "v" + strconv.Itoa(s.version),
		"VersionStages": []string{"AWSCURRENT"}, "CreatedDate": epoch(s.changed)}
	if s.str != nil {
		out["SecretString"] = *s.str
	} else {
		out["SecretBinary"] = s.bin
	}
	return out, nil
}

func (f *FakeSecretsManager) describe(name string, s *fakeSecret) map[string]any {
	out := map[string]any{"ARN": arn(name), "Name": name, "CreatedDate": epoch(s.created), "LastChangedDate": epoch(s.changed)}
	if !s.deletion.IsZero() {
		out["DeletedDate"] = epoch(s.deletion)
	}
	return out
}

func (f *FakeSecretsManager) describeSecret(body []byte) (any, *awsError) {
	var in struct{ SecretId string }
	if aerr := decode(body, &in); aerr != nil {
		return nil, aerr
	}
	s := f.secrets[in.SecretId]
	if s == nil {
		return nil, errNotFound()
	}
	return f.describe(in.SecretId, s), nil
}

func (f *FakeSecretsManager) listSecrets(body []byte) (any, *awsError) {
	var in struct {
		Filters []struct {
			Key    string
			Values []string
		}
		IncludePlannedDeletion bool
		MaxResults             int
		NextToken              string
	}
	if aerr := decode(body, &in); aerr != nil {
		return nil, aerr
	}
	if in.MaxResults > 100 {
		return nil, errorf("ValidationException", "1 validation error detected: Value '%d' at 'maxResults' failed to satisfy constraint: Member must have value less than or equal to 100", in.MaxResults)
	}
	var names []string
	for name, s := range f.secrets {
		if !s.deletion.IsZero() && !in.IncludePlannedDeletion {
			continue
		}
		ok := true
		for _, flt := range in.Filters {
			if flt.Key != "name" {
				return nil, errorf("InvalidParameterException", "this fake supports only the name filter, not %q", flt.Key)
			}
			match := false
			for _, v := range flt.Values {
				match = match || strings.HasPrefix(name, v) // case-sensitive prefix
			}
			ok = ok && match
		}
		if ok {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	size := f.PageSize
	if in.MaxResults > 0 && in.MaxResults < size {
		size = in.MaxResults
	}
	from, to, next, aerr := page(len(names), size, in.NextToken)
	if aerr != nil {
		return nil, aerr
	}
	list := []map[string]any{}
	for _, name := range names[from:to] {
		list = append(list, f.describe(name, f.secrets[name]))
	}
	out := map[string]any{"SecretList": list}
	if next != "" {
		out["NextToken"] = next
	}
	return out, nil
}

func (f *FakeSecretsManager) deleteSecret(body []byte) (any, *awsError) {
	var in struct {
		SecretId                   string
		RecoveryWindowInDays       *int
		ForceDeleteWithoutRecovery bool
	}
	if aerr := decode(body, &in); aerr != nil {
		return nil, aerr
	}
	if in.ForceDeleteWithoutRecovery && in.RecoveryWindowInDays != nil {
		return nil, errorf("InvalidParameterException", "You can't use ForceDeleteWithoutRecovery in conjunction with RecoveryWindowInDays.")
	}
	if w := in.RecoveryWindowInDays; w != nil && (*w < 7 || *w > 30) {
		return nil, errorf("InvalidParameterException", "The RecoveryWindowInDays value must be between 7 and 30 days (inclusive).")
	}
	now := f.now()
	if in.ForceDeleteWithoutRecovery {
		// Succeeds for absent secrets too, so that retries are safe.
		delete(f.secrets, in.SecretId)
		return map[string]any{"ARN": arn(in.SecretId), "Name": in.SecretId, "DeletionDate": epoch(now)}, nil
	}
	s, aerr := f.lookup(in.SecretId)
	if aerr != nil {
		return nil, aerr
	}
	s.deletion = now
	window := 30
	if in.RecoveryWindowInDays != nil {
		window = *in.RecoveryWindowInDays
	}
	return map[string]any{"ARN": arn(in.SecretId), "Name": in.SecretId, "DeletionDate": epoch(now.AddDate(0, 0, window))}, nil
}

func (f *FakeSecretsManager) restoreSecret(body []byte) (any, *awsError) {
	var in struct{ SecretId string }
	if aerr := decode(body, &in); aerr != nil {
		return nil, aerr
	}
	s := f.secrets[in.SecretId]
	if s == nil {
		return nil, errNotFound()
	}
	s.deletion = time.Time{}
	return map[string]any{"ARN": arn(in.SecretId), "Name": in.SecretId}, nil
}
