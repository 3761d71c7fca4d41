// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package secretstest

import (
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// FakeSSM is an in-process SSM Parameter Store speaking AWS JSON 1.1
// (X-Amz-Target: AmazonSSM.<Operation>). It implements PutParameter,
// GetParameter, GetParametersByPath, DeleteParameter and (for parameters)
// ListTagsForResource with the service's
// error codes, 4 KiB standard-tier values and NextToken paging.
type FakeSSM struct {
	fakeService
	// PageSize bounds GetParametersByPath pages (the service's maximum is
	// 10); small values exercise paging.
	PageSize int
	params   map[string]*fakeParameter
	kms      map[string]string // name → error code for decryption
	tagsErr  map[string]string // name → error code for ListTagsForResource
}

type fakeParameter struct {
	typ      string
	value    string
	version  int64
	modified time.Time
	tags     map[string]string
}

// NewFakeSSM starts a fake that is closed when the test ends.
func NewFakeSSM(t testing.TB) *FakeSSM {
	f := &FakeSSM{PageSize: 3, params: map[string]*fakeParameter{}, kms: map[string]string{}, tagsErr: map[string]string{}}
	f.prefix = "AmazonSSM."
	f.ops = map[string]func([]byte) (any, *awsError){
		"PutParameter":        f.putParameter,
		"GetParameter":        f.getParameter,
		"GetParametersByPath": f.getParametersByPath,
		"DeleteParameter":     f.deleteParameter,
		"ListTagsForResource": f.listTagsForResource,
	}
	f.start(t)
	return f
}

// Seed stores a parameter of any type (String, StringList, SecureString)
// directly, as another tool would have.
func (f *FakeSSM) Seed(name, typ, value string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.params[name] = &fakeParameter{typ: typ, value: value, version: 1, modified: f.now()}
}

// SeedTagged stores a SecureString parameter with tags, as another tool
// (or another Podmin context) would have.
func (f *FakeSSM) SeedTagged(name, value string, tags map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.params[name] = &fakeParameter{typ: "SecureString", value: value, version: 1, modified: f.now(), tags: maps.Clone(tags)}
}

// Tags returns a parameter's tags, nil when absent.
func (f *FakeSSM) Tags(name string) map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p := f.params[name]; p != nil {
		return maps.Clone(p.tags)
	}
	return nil
}

// BreakTags makes ListTagsForResource on name fail with an error code such
// as AccessDeniedException.
func (f *FakeSSM) BreakTags(name, code string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tagsErr[name] = code
}

// BreakKMS makes decrypting name fail with an error code such as
// InvalidKeyId, or AccessDeniedException for a kms:Decrypt denial.
func (f *FakeSSM) BreakKMS(name, code string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.kms[name] = code
}

// Type returns the stored type of a parameter, "" when absent.
func (f *FakeSSM) Type(name string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p := f.params[name]; p != nil {
		return p.typ
	}
	return ""
}

// ciphertext stands in for an undecrypted SecureString: opaque and never
// the value.
const ciphertext = "AQICAHhFAKEFAKEFAKEciphertextFAKE=="

func (f *FakeSSM) render(name string, p *fakeParameter, decrypt bool) map[string]any {
	v := p.value
	if p.typ == "SecureString" && !decrypt {
		v = ciphertext
	}
	return map[string]any{
		"Name": name, "Type": p.typ, "Value": v, "Version": p.version, "DataType": "text",
		"LastModifiedDate": epoch(p.modified), "ARN": "arn:aws:ssm:us-east-1:123456789012:parameter" + name,
	}
}

func validName(name string) *awsError {
	if name == "" || len(name) > 2048 {
		return errorf("ValidationException", "1 validation error detected: Value at 'name' failed to satisfy constraint: Member must have length between 1 and 2048")
	}
	if strings.Contains(name, "/") && !strings.HasPrefix(name, "/") {
		return errorf("ValidationException", "Parameter name: can't be prefixed with \"aws\" or \"ssm\" (case-insensitive). If formed as a path, it can consist of sub-paths divided by slash symbol; each sub-path can be formed as a mix of letters, numbers and the following 3 symbols .-_")
	}
	return nil
}

func (f *FakeSSM) putParameter(body []byte) (any, *awsError) {
	var in struct {
		Name, Value, Type string
		Overwrite         bool
		Tags              []struct{ Key, Value string }
	}
	if aerr := decode(body, &in); aerr != nil {
		return nil, aerr
	}
	if len(in.Tags) > 0 && in.Overwrite {
		return nil, errorf("ValidationException", "Invalid request: tags and overwrite can't be used together. To create a parameter with tags, please remove overwrite flag. To update tags for an existing parameter, please use AddTagsToResource or RemoveTagsFromResource.")
	}
	if aerr := validName(in.Name); aerr != nil {
		return nil, aerr
	}
	if len(in.Value) > 4096 {
		return nil, errorf("ValidationException", "1 validation error detected: Value at 'value' failed to satisfy constraint: Member must have length less than or equal to 4096")
	}
	if !slices.Contains([]string{"String", "StringList", "SecureString"}, in.Type) {
		in.Type = "String"
		if p := f.params[in.Name]; p != nil {
			in.Type = p.typ
		}
	}
	p := f.params[in.Name]
	if p != nil && !in.Overwrite {
		return nil, errorf("ParameterAlreadyExists", "The parameter already exists. To overwrite this value, set the overwrite option in the request to true.")
	}
	if p == nil {
		p = &fakeParameter{}
		f.params[in.Name] = p
		for _, t := range in.Tags {
			if p.tags == nil {
				p.tags = map[string]string{}
			}
			p.tags[t.Key] = t.Value
		}
	}
	p.typ, p.value, p.modified = in.Type, in.Value, f.now()
	p.version++
	return map[string]any{"Version": p.version, "Tier": "Standard"}, nil
}

func (f *FakeSSM) getParameter(body []byte) (any, *awsError) {
	var in struct {
		Name           string
		WithDecryption bool
	}
	if aerr := decode(body, &in); aerr != nil {
		return nil, aerr
	}
	p := f.params[in.Name]
	if p == nil {
		return nil, errorf("ParameterNotFound", "")
	}
	if code := f.kms[in.Name]; code != "" && in.WithDecryption && p.typ == "SecureString" {
		if code == "AccessDeniedException" {
			return nil, errorf(code, "User: arn:aws:iam::123456789012:user/podmin is not authorized to perform: kms:Decrypt on resource: arn:aws:kms:us-east-1:123456789012:key/fake because no identity-based policy allows the kms:Decrypt action")
		}
		return nil, errorf(code, "The query key ID isn't valid.")
	}
	return map[string]any{"Parameter": f.render(in.Name, p, in.WithDecryption)}, nil
}

func (f *FakeSSM) getParametersByPath(body []byte) (any, *awsError) {
	var in struct {
		Path                      string
		Recursive, WithDecryption bool
		MaxResults                int
		NextToken                 string
	}
	if aerr := decode(body, &in); aerr != nil {
		return nil, aerr
	}
	if !strings.HasPrefix(in.Path, "/") {
		return nil, errorf("ValidationException", "The parameter doesn't meet the parameter name requirements. The parameter name must begin with a forward slash \"/\".")
	}
	if in.MaxResults > 10 {
		return nil, errorf("ValidationException", "1 validation error detected: Value '%d' at 'maxResults' failed to satisfy constraint: Member must have value less than or equal to 10", in.MaxResults)
	}
	prefix := strings.TrimSuffix(in.Path, "/") + "/"
	var names []string
	for name := range f.params {
		rest, ok := strings.CutPrefix(name, prefix)
		if ok && (in.Recursive || !strings.Contains(rest, "/")) {
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
	params := []map[string]any{}
	for _, name := range names[from:to] {
		params = append(params, f.render(name, f.params[name], in.WithDecryption))
	}
	out := map[string]any{"Parameters": params}
	if next != "" {
		out["NextToken"] = next
	}
	return out, nil
}

func (f *FakeSSM) deleteParameter(body []byte) (any, *awsError) {
	var in struct{ Name string }
	if aerr := decode(body, &in); aerr != nil {
		return nil, aerr
	}
	if f.params[in.Name] == nil {
		return nil, errorf("ParameterNotFound", "")
	}
	delete(f.params, in.Name)
	return map[string]any{}, nil
}

func (f *FakeSSM) listTagsForResource(body []byte) (any, *awsError) {
	var in struct{ ResourceType, ResourceId string }
	if aerr := decode(body, &in); aerr != nil {
		return nil, aerr
	}
	if in.ResourceType != "Parameter" {
		return nil, errorf("InvalidResourceType", "The resource type is not valid. For example, if you are attempting to tag an EC2 instance, the instance must be a registered managed node.")
	}
	if code := f.tagsErr[in.ResourceId]; code != "" {
		return nil, errorf(code, "User: arn:aws:iam::123456789012:user/podmin is not authorized to perform this operation on resource: arn:aws:ssm:us-east-1:123456789012:parameter%s", in.ResourceId)
	}
	p := f.params[in.ResourceId]
	if p == nil {
		return nil, errorf("InvalidResourceId", "The resource ID is not valid. Verify that you entered the correct ID and try again.")
	}
	keys := slices.Sorted(maps.Keys(p.tags))
	list := []map[string]string{}
	for _, k := range keys {
		list = append(list, map[string]string{"Key": k, "Value": p.tags[k]})
	}
	return map[string]any{"TagList": list}, nil
}
