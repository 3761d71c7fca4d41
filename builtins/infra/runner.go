// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package infra

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"golang.org/x/mod/semver"

	"podmin.dev/podmin/internal/state"
	"podmin.dev/podmin/internal/syncio"
)

// PlanFile is the saved plan in the module directory; apply applies
// exactly it.
const PlanFile = "podmin.tfplan"

// ErrStateLocked reports that another run holds the state lock.
var ErrStateLocked = errors.New("the OpenTofu/Terraform state is locked")

// ErrTool reports that OpenTofu/Terraform failed.
var ErrTool = errors.New("OpenTofu/Terraform failed")

// Runner runs OpenTofu or Terraform in one module directory with the
// cluster's S3 backend. It passes no secret: the module, its variables and
// the environment it adds hold none.
type Runner struct {
	// Dir is the module directory.
	Dir string
	// Bucket, Region and Profile configure the S3 backend.
	Bucket, Region, Profile string
	// CacheDir is the Podmin cache; the shared plugin cache is
	// <CacheDir>/tf-plugins unless TF_PLUGIN_CACHE_DIR is set.
	CacheDir string
	// LookupEnv reads the environment (PODMIN_TF_CMD, TF_PLUGIN_CACHE_DIR).
	LookupEnv func(string) (string, bool)
	// Environ is the environment the tool inherits.
	Environ []string
	// LookPath finds tofu and terraform; nil means exec.LookPath.
	LookPath func(string) (string, error)
	// Output receives the tool's output as it runs (a terminal); nil
	// discards it.
	Output io.Writer
	// Progress names each step before it runs.
	Progress func(string)
	// NoLock plans without taking the state lock (a dry run writes
	// nothing, not even the lock object).
	NoLock bool
}

// PlanResult is a saved plan's summary.
type PlanResult struct {
	Add, Change, Destroy int
	// Text is the tool's human rendering of the plan.
	Text string
}

func (r *Runner) lookupEnv(k string) (string, bool) {
	if r.LookupEnv == nil {
		return "", false
	}
	return r.LookupEnv(k)
}

// Executable returns PODMIN_TF_CMD, else tofu, else terraform from PATH.
func (r *Runner) Executable() (string, error) {
	if v, ok := r.lookupEnv("PODMIN_TF_CMD"); ok && v != "" {
		return v, nil
	}
	look := r.LookPath
	if look == nil {
		look = exec.LookPath
	}
	for _, name := range []string{"tofu", "terraform"} {
		if p, err := look(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("OpenTofu/Terraform is not installed: install OpenTofu or Terraform 1.11 or newer (tofu or terraform on PATH), or set PODMIN_TF_CMD")
}

// PluginCacheDir is the provider cache the tool uses.
func (r *Runner) PluginCacheDir() string {
	if v, ok := r.lookupEnv("TF_PLUGIN_CACHE_DIR"); ok && v != "" {
		return v
	}
	return filepath.Join(r.CacheDir, "tf-plugins")
}

// result is one finished tool command.
type result struct {
	// stdout is what the tool printed on standard output: the only
	// stream a machine-readable answer (-json) is read from.
	stdout string
	// all is both streams as they interleaved, for errors.
	all  string
	code int
}

// run runs one tool command in Dir. Standard output and standard error
// stay apart: the tool prints warnings (a CLI configuration it cannot
// read, deprecations) on standard error even when it answers in JSON.
func (r *Runner) run(ctx context.Context, step string, args ...string) (result, error) {
	bin, err := r.Executable()
	if err != nil {
		return result{}, err
	}
	cache := r.PluginCacheDir()
	// The tool refuses a plugin cache directory that does not exist.
	if err := os.MkdirAll(cache, 0o700); err != nil {
		return result{}, fmt.Errorf("create the OpenTofu/Terraform plugin cache %s: %w", cache, err)
	}
	if r.Progress != nil {
		r.Progress("OpenTofu/Terraform " + step)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = r.Dir
	cmd.Env = append(append([]string(nil), r.Environ...),
		"TF_IN_AUTOMATION=1", "TF_INPUT=0", "CHECKPOINT_DISABLE=1",
		"TF_PLUGIN_CACHE_DIR="+cache)
	var stdout, all syncio.Buffer
	var out, errs io.Writer = io.MultiWriter(&stdout, &all), &all
	if r.Output != nil {
		// Both streams are copied by their own goroutine.
		shown := &lockedWriter{w: r.Output}
		out, errs = io.MultiWriter(out, shown), io.MultiWriter(errs, shown)
	}
	cmd.Stdout, cmd.Stderr = out, errs
	err = cmd.Run()
	res := result{stdout: stdout.String(), all: all.String()}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		res.code, err = exit.ExitCode(), nil
	}
	if err != nil {
		return res, fmt.Errorf("run OpenTofu/Terraform (%s): %w", bin, err)
	}
	return res, nil
}

// lockedWriter serializes writes from several goroutines to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

var lockIDRE = regexp.MustCompile(`(?m)^\s*ID:\s+(\S+)`)

// failure turns a failed command into an error: a held state lock is
// ErrStateLocked with how to release it.
func (r *Runner) failure(step, out string, code int) error {
	if strings.Contains(out, "Error acquiring the state lock") {
		id := "<lock ID>"
		if m := lockIDRE.FindStringSubmatch(out); m != nil {
			id = m[1]
		}
		return fmt.Errorf("%w: another setup, teardown or destroy of this cluster is running, or one was interrupted: wait for it, or if none is running, run \"force-unlock %s\" with OpenTofu/Terraform in %s", ErrStateLocked, id, r.Dir)
	}
	return fmt.Errorf("%w: %s exited with status %d (its output is above; the module is in %s)", ErrTool, step, code, r.Dir)
}

// minVersion is the oldest OpenTofu/Terraform the module supports; its
// pre-releases count as that version, as they did when the module was
// tested against them.
const minVersion = "v1.11"

// CheckVersion requires OpenTofu/Terraform 1.11 or newer.
func (r *Runner) CheckVersion(ctx context.Context) error {
	res, err := r.run(ctx, "version", "version", "-json")
	if err != nil {
		return err
	}
	if res.code != 0 {
		return r.failure("version", res.all, res.code)
	}
	var v struct {
		Version string `json:"terraform_version"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &v); err != nil {
		return fmt.Errorf("OpenTofu/Terraform printed no version (%w): its output is above", err)
	}
	sv := "v" + strings.TrimPrefix(v.Version, "v")
	if !semver.IsValid(sv) {
		return fmt.Errorf("OpenTofu/Terraform version %q is not understood: install 1.11 or newer", v.Version)
	}
	if semver.Compare(semver.MajorMinor(sv), minVersion) < 0 {
		return fmt.Errorf("OpenTofu/Terraform %s is too old: install 1.11 or newer", v.Version)
	}
	return nil
}

// Init initializes the S3 backend at tfstate/podmin.tfstate with its lock
// file and the providers through the plugin cache.
func (r *Runner) Init(ctx context.Context) error {
	args := []string{"init", "-input=false", "-reconfigure",
		"-backend-config=bucket=" + r.Bucket,
		"-backend-config=key=" + state.TFStatePath,
		"-backend-config=region=" + r.Region,
		"-backend-config=use_lockfile=true",
		"-backend-config=encrypt=true"}
	if r.Profile != "" {
		args = append(args, "-backend-config=profile="+r.Profile)
	}
	if r.customS3Endpoint() {
		// An S3-compatible service (AWS_ENDPOINT_URL_S3, which the
		// backend reads too) serves buckets by path and has no STS or
		// IAM to validate credentials or name the account with.
		args = append(args, "-backend-config=use_path_style=true",
			"-backend-config=skip_credentials_validation=true",
			"-backend-config=skip_requesting_account_id=true")
	}
	if r.NoLock {
		args = append(args, "-lock=false")
	}
	res, err := r.run(ctx, "init", args...)
	if err != nil {
		return err
	}
	if res.code != 0 {
		return r.failure("init", res.all, res.code)
	}
	return nil
}

// customS3Endpoint reports whether the standard AWS configuration points
// S3 at another service.
func (r *Runner) customS3Endpoint() bool {
	for _, k := range []string{"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"} {
		if v, ok := r.lookupEnv(k); ok && v != "" {
			return true
		}
	}
	return false
}

// Validate checks the initialized module without the state or any
// provider API.
func (r *Runner) Validate(ctx context.Context) error {
	res, err := r.run(ctx, "validate", "validate", "-no-color")
	if err != nil {
		return err
	}
	if res.code != 0 {
		return r.failure("validate", res.all, res.code)
	}
	return nil
}

// Plan saves a plan (a destroy plan when destroy is set) and summarizes
// it.
func (r *Runner) Plan(ctx context.Context, destroy bool) (PlanResult, error) {
	args := []string{"plan", "-input=false", "-lock-timeout=60s", "-detailed-exitcode", "-out=" + PlanFile}
	if destroy {
		args = append(args, "-destroy")
	}
	if r.NoLock {
		args = append(args, "-lock=false")
	}
	planned, err := r.run(ctx, "plan", args...)
	if err != nil {
		return PlanResult{}, err
	}
	if planned.code != 0 && planned.code != 2 {
		return PlanResult{}, r.failure("plan", planned.all, planned.code)
	}
	res := PlanResult{Text: planned.stdout}
	if planned.code == 0 {
		return res, nil
	}
	shown, err := r.run(ctx, "show", "show", "-json", PlanFile)
	if err != nil {
		return res, err
	}
	if shown.code != 0 {
		return res, r.failure("show", shown.all, shown.code)
	}
	var plan struct {
		ResourceChanges []struct {
			Change struct {
				Actions []string `json:"actions"`
			} `json:"change"`
		} `json:"resource_changes"`
	}
	if err := json.Unmarshal([]byte(shown.stdout), &plan); err != nil {
		return res, fmt.Errorf("read the OpenTofu/Terraform plan: %w", err)
	}
	for _, rc := range plan.ResourceChanges {
		for _, a := range rc.Change.Actions {
			switch a {
			case "create":
				res.Add++
			case "update":
				res.Change++
			case "delete":
				res.Destroy++
			}
		}
	}
	return res, nil
}

// Apply applies the saved plan; it never plans anew, so what was shown is
// what is applied.
func (r *Runner) Apply(ctx context.Context) error {
	res, err := r.run(ctx, "apply", "apply", "-input=false", "-lock-timeout=60s", PlanFile)
	if err != nil {
		return err
	}
	if res.code != 0 {
		return r.failure("apply", res.all, res.code)
	}
	return nil
}

// Outputs returns the state's outputs (output -json), by name.
func (r *Runner) Outputs(ctx context.Context) (map[string]json.RawMessage, error) {
	res, err := r.run(ctx, "output", "output", "-json")
	if err != nil {
		return nil, err
	}
	if res.code != 0 {
		return nil, r.failure("output", res.all, res.code)
	}
	var raw map[string]struct {
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &raw); err != nil {
		return nil, fmt.Errorf("read the OpenTofu/Terraform outputs: %w", err)
	}
	outs := map[string]json.RawMessage{}
	for k, v := range raw {
		outs[k] = v.Value
	}
	return outs, nil
}
