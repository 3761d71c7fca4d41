// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package service

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"podmin.dev/podmin/internal/paths"
)

// DefaultHostsPath is the hosts file, below the node root, from which the
// node's CoreDNS answers Service names itself, so they resolve while the
// agent is down (restarting, upgrading).
const DefaultHostsPath = "/var/lib/podmin/dns/hosts"

// HostsReload is how often CoreDNS looks for a changed hosts file.
const HostsReload = time.Second

// ErrNotPersisted marks an Update whose records are served but could not
// be written to disk (the durable record set or the hosts file CoreDNS
// serves while the agent is down): match it with errors.Is to report
// that the node cannot persist its state.
var ErrNotPersisted = errors.New("free or repair the node's disk: the next update writes the records again")

// renderHosts is the hosts file of services: one "<VIP> <FQDN>" line per
// Service, in the table's order.
func renderHosts(services []Service) []byte {
	var b strings.Builder
	b.WriteString("# Service VIPs of this node's cluster, written by podmin-agent for CoreDNS.\n")
	for _, s := range services {
		fmt.Fprintf(&b, "%s %s\n", s.VIP, s.FQDN())
	}
	return []byte(b.String())
}

// hostsWriter writes the hosts file atomically with a modification time
// above the last one it wrote: CoreDNS reloads a file whose time or size
// changed, and two files of one size written within one tick of the
// file system's clock would otherwise look the same to it.
type hostsWriter struct {
	path string
	last time.Time
}

func (w *hostsWriter) write(services []Service, now time.Time) error {
	if err := os.MkdirAll(filepath.Dir(w.path), 0o755); err != nil {
		return fmt.Errorf("create the directory of %s: %w", w.path, err)
	}
	mtime := now
	if !mtime.After(w.last) {
		mtime = w.last.Add(time.Millisecond)
	}
	tmp, err := paths.CreateTemp(filepath.Dir(w.path))
	if err != nil {
		return fmt.Errorf("write %s: %w", w.path, err)
	}
	err = func() error {
		defer tmp.Close()
		if err := tmp.Chmod(0o644); err != nil {
			return err
		}
		if _, err := tmp.Write(renderHosts(services)); err != nil {
			return err
		}
		if err := tmp.Sync(); err != nil {
			return err
		}
		return tmp.Close()
	}()
	if err == nil {
		err = os.Chtimes(tmp.Name(), mtime, mtime)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), w.path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", w.path, err)
	}
	w.last = mtime
	return paths.SyncDir(filepath.Dir(w.path))
}
