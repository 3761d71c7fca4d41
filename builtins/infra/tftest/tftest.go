// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package tftest

import (
	"cmp"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// MirrorEnv names a directory holding the AWS provider in a Terraform
// filesystem-mirror layout (<dir>/registry.terraform.io/hashicorp/aws/...).
const MirrorEnv = "PODMIN_TF_PROVIDER_MIRROR"

// registry is where Terraform installs the provider from without a
// mirror.
const registry = "registry.terraform.io:443"

// Terraform is the real terraform binary with what it needs to install
// the AWS provider offline.
type Terraform struct {
	// Bin is the terraform executable.
	Bin string
	// Mirror is the provider mirror directory, or empty when the provider
	// comes from the public registry.
	Mirror string
	// CLIConfig is a CLI configuration file that installs hashicorp
	// providers only from Mirror; empty without a mirror.
	CLIConfig string
}

// Find returns the terraform binary and the AWS provider's source, or
// skips t saying what is missing.
func Find(t testing.TB) Terraform {
	t.Helper()
	bin, err := exec.LookPath("terraform")
	if err != nil {
		t.Skip("terraform is not installed (no terraform on PATH): the module's Terraform checks need Terraform 1.11 or newer")
	}
	tf := Terraform{Bin: bin}
	if dir, ok := os.LookupEnv(MirrorEnv); ok && dir != "" {
		if !HasAWSProvider(dir) {
			t.Fatalf("%s=%s holds no AWS provider for %s_%s in a filesystem-mirror layout (registry.terraform.io/hashicorp/aws/VERSION/%s_%s/)", MirrorEnv, dir, runtime.GOOS, runtime.GOARCH, runtime.GOOS, runtime.GOARCH)
		}
		tf.Mirror = dir
	} else {
		for _, d := range StandardPluginDirs() {
			if HasAWSProvider(d) {
				tf.Mirror = d
				break
			}
		}
	}
	if tf.Mirror == "" {
		c, err := net.DialTimeout("tcp", registry, 5*time.Second)
		if err != nil {
			t.Skipf("no AWS provider mirror (set %s, or put one in %s) and the registry is unreachable (%v): the module's Terraform checks cannot install the provider",
				MirrorEnv, strings.Join(StandardPluginDirs(), ", "), err)
		}
		c.Close()
		t.Logf("no AWS provider mirror: installing the provider from %s", registry)
		return tf
	}
	tf.CLIConfig = filepath.Join(t.TempDir(), "terraform.rc")
	if err := os.WriteFile(tf.CLIConfig, []byte(MirrorConfig(tf.Mirror)), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Logf("AWS provider mirror: %s", tf.Mirror)
	return tf
}

// MirrorConfig is a CLI configuration that installs every hashicorp
// provider from the filesystem mirror dir and nothing from the network.
func MirrorConfig(dir string) string {
	return fmt.Sprintf(`provider_installation {
  filesystem_mirror {
    path    = %q
    include = ["registry.terraform.io/hashicorp/*"]
  }
  direct {
    exclude = ["registry.terraform.io/hashicorp/*"]
  }
}
`, dir)
}

// Env is the environment for running tf.Bin: the CLI configuration, no
// update checks, and PATH.
func (tf Terraform) Env() []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1"}
	if tf.CLIConfig != "" {
		env = append(env, "TF_CLI_CONFIG_FILE="+tf.CLIConfig)
	}
	return env
}

// StandardPluginDirs are the directories Terraform searches for providers
// without any configuration on this OS (its implied local mirrors).
func StandardPluginDirs() []string {
	var dirs []string
	if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(home, ".terraform.d", "plugins"))
		if runtime.GOOS != "windows" {
			dirs = append(dirs, filepath.Join(cmp.Or(os.Getenv("XDG_DATA_HOME"), filepath.Join(home, ".local", "share")), "terraform", "plugins"))
		}
	}
	if runtime.GOOS != "windows" {
		for _, d := range filepath.SplitList(cmp.Or(os.Getenv("XDG_DATA_DIRS"), "/usr/local/share:/usr/share")) {
			dirs = append(dirs, filepath.Join(d, "terraform", "plugins"))
		}
	}
	return dirs
}

// HasAWSProvider reports whether dir holds the AWS provider for this
// platform, unpacked or packed.
func HasAWSProvider(dir string) bool {
	platform := runtime.GOOS + "_" + runtime.GOARCH
	base := filepath.Join(dir, "registry.terraform.io", "hashicorp", "aws")
	if m, _ := filepath.Glob(filepath.Join(base, "*", platform, "terraform-provider-aws*")); len(m) > 0 {
		return true
	}
	m, _ := filepath.Glob(filepath.Join(base, "terraform-provider-aws_*_"+platform+".zip"))
	return len(m) > 0
}

// ImpliedMirror returns a directory to use as XDG_DATA_HOME in which
// Terraform finds tf.Mirror's AWS provider among its implied local mirrors
// (<XDG_DATA_HOME>/terraform/plugins), so it installs offline without any
// CLI configuration. It is empty when the provider comes from the registry.
func ImpliedMirror(t testing.TB, tf Terraform) string {
	t.Helper()
	if tf.Mirror == "" {
		return ""
	}
	data := t.TempDir()
	platform := runtime.GOOS + "_" + runtime.GOARCH
	dirs, err := filepath.Glob(filepath.Join(tf.Mirror, "registry.terraform.io", "hashicorp", "aws", "*", platform))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("%s holds no unpacked AWS provider for %s (%v)", tf.Mirror, platform, err)
	}
	for _, d := range dirs {
		version := filepath.Base(filepath.Dir(d))
		link := filepath.Join(data, "terraform", "plugins", "registry.terraform.io", "hashicorp", "aws", version, platform)
		if err := os.MkdirAll(filepath.Dir(link), 0o700); err != nil {
			t.Fatal(err)
		}
		// Terraform follows a symbolic link at the platform directory,
		// as it makes them itself.
		if err := os.Symlink(d, link); err != nil {
			t.Fatal(err)
		}
	}
	return data
}
