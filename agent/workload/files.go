// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package workload

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"podmin.dev/podmin/internal/paths"
)

// Names inside /run/podmin/workloads/<pod>/.
const (
	// GenerationsDir holds the immutable generations.
	GenerationsDir = "identity-generations"
	// LinkName is the relative symlink selecting the current generation;
	// the Pod's identity hostPath volume points at it.
	LinkName = "identity"
	// CertFile, KeyFile and CAFile are the files of a generation.
	CertFile = "tls.crt"
	KeyFile  = "tls.key"
	CAFile   = "ca.crt"
	// FileMode lets non-root containers read their dedicated mount.
	FileMode = 0o444
)

// generation is the content of one generation directory.
type generation struct {
	cert, key, ca []byte
}

// writeGeneration writes g as the generation name beneath
// podDir and atomically points the identity symlink at it. It returns the
// generation the link selected before, "" when none.
func writeGeneration(podDir, name string, g generation) (previous string, err error) {
	gens := filepath.Join(podDir, GenerationsDir)
	if err := os.MkdirAll(gens, 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", gens, err)
	}
	final := filepath.Join(gens, name)
	if _, err := os.Lstat(final); err == nil {
		return "", fmt.Errorf("generation %s already exists", final)
	}
	tmp := filepath.Join(gens, "."+name+".tmp-"+randomSuffix())
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return "", err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(tmp)
		}
	}()
	for _, f := range []struct {
		name string
		data []byte
	}{{CertFile, g.cert}, {KeyFile, g.key}, {CAFile, g.ca}} {
		if err := writeSynced(filepath.Join(tmp, f.name), f.data); err != nil {
			return "", err
		}
	}
	if err := paths.SyncDir(tmp); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, final); err != nil {
		return "", err
	}
	if err := paths.SyncDir(gens); err != nil {
		return "", err
	}
	previous, _ = currentGeneration(podDir)
	removeStaleLinks(podDir)
	link := filepath.Join(podDir, LinkName)
	tmpLink := filepath.Join(podDir, "."+LinkName+".tmp-"+randomSuffix())
	if err := os.Symlink(GenerationsDir+"/"+name, tmpLink); err != nil {
		return "", err
	}
	if err := os.Rename(tmpLink, link); err != nil {
		// The static-Pod reconciler may have made an empty directory as a
		// placeholder for kubelet: replace it once with the link.
		fi, lerr := os.Lstat(link)
		if lerr != nil || !fi.IsDir() || os.Remove(link) != nil || os.Rename(tmpLink, link) != nil {
			_ = os.Remove(tmpLink)
			return "", fmt.Errorf("switch %s: %w", link, err)
		}
	}
	return previous, paths.SyncDir(podDir)
}

// generationIntact reports whether the identity symlink of podDir selects
// generation gen and its three files exist: what kubelet's hostPath volume
// and the Pod's containers need. It costs a readlink and three stats.
func generationIntact(podDir, gen string) bool {
	cur, err := currentGeneration(podDir)
	if err != nil || cur != gen {
		return false
	}
	for _, name := range []string{CertFile, KeyFile, CAFile} {
		fi, err := os.Stat(filepath.Join(podDir, LinkName, name))
		if err != nil || !fi.Mode().IsRegular() {
			return false
		}
	}
	return true
}

// replaceCA makes ca.crt of every generation beneath podDir hold bundle:
// a synced temporary file in the generation, renamed over ca.crt, then
// one sync of the directory. A container that mounts the generation sees
// the old file or the new one, never a mix, and keeps running.
func replaceCA(podDir string, bundle []byte) error {
	gens := filepath.Join(podDir, GenerationsDir)
	entries, err := os.ReadDir(gens)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		dir := filepath.Join(gens, e.Name())
		if cur, err := os.ReadFile(filepath.Join(dir, CAFile)); err == nil && bytes.Equal(cur, bundle) {
			continue
		}
		tmp := filepath.Join(dir, "."+CAFile+".tmp-"+randomSuffix())
		if err := writeSynced(tmp, bundle); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := os.Rename(tmp, filepath.Join(dir, CAFile)); err != nil {
			_ = os.Remove(tmp)
			errs = append(errs, err)
			continue
		}
		errs = append(errs, paths.SyncDir(dir))
	}
	return errors.Join(errs...)
}

// writeSynced creates path with FileMode regardless of the umask and syncs
// it.
func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	err = errors.Join(err, f.Chmod(FileMode), f.Sync(), f.Close())
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func randomSuffix() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// currentGeneration returns the generation the identity symlink selects.
func currentGeneration(podDir string) (string, error) {
	target, err := os.Readlink(filepath.Join(podDir, LinkName))
	if err != nil {
		return "", err
	}
	name, ok := strings.CutPrefix(target, GenerationsDir+"/")
	if !ok || name == "" || strings.Contains(name, "/") {
		return "", fmt.Errorf("identity symlink in %s points at %q, outside %s", podDir, target, GenerationsDir)
	}
	return name, nil
}

// readGeneration reads the files of the current generation.
func readGeneration(podDir string) (string, generation, error) {
	name, err := currentGeneration(podDir)
	if err != nil {
		return "", generation{}, err
	}
	dir := filepath.Join(podDir, GenerationsDir, name)
	var g generation
	for _, f := range []struct {
		name string
		into *[]byte
	}{{CertFile, &g.cert}, {KeyFile, &g.key}, {CAFile, &g.ca}} {
		fi, err := os.Lstat(filepath.Join(dir, f.name))
		if err != nil {
			return "", generation{}, err
		}
		if !fi.Mode().IsRegular() || fi.Mode().Perm() != FileMode {
			return "", generation{}, fmt.Errorf("%s/%s is %s, not a mode %o file", dir, f.name, fi.Mode(), FileMode)
		}
		if *f.into, err = os.ReadFile(filepath.Join(dir, f.name)); err != nil {
			return "", generation{}, err
		}
	}
	return name, g, nil
}

// pruneGenerations removes every generation and leftover temporary entry
// except keep (the current and the one previous generation).
func pruneGenerations(podDir string, keep ...string) error {
	gens := filepath.Join(podDir, GenerationsDir)
	entries, err := os.ReadDir(gens)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if e.Name() == "" || contains(keep, e.Name()) {
			continue
		}
		errs = append(errs, os.RemoveAll(filepath.Join(gens, e.Name())))
	}
	return errors.Join(errs...)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s && x != "" {
			return true
		}
	}
	return false
}

// removeStaleLinks removes temporary links an interrupted switch left.
func removeStaleLinks(podDir string) {
	stale, _ := filepath.Glob(filepath.Join(podDir, "."+LinkName+".tmp-*"))
	for _, p := range stale {
		_ = os.Remove(p)
	}
}
