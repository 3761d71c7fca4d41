// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package service

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"podmin.dev/podmin/internal/paths"
)

// DefaultStatePath is the durable record set below the node root.
const DefaultStatePath = "/var/lib/podmin/dns/services.json"

// stateVersion is the format of the durable file.
const stateVersion = 1

// durable is the file's content: Service identities only. It has no field
// for backends or readiness, so a restored set can never route to a backend
// that went away while the agent was down.
type durable struct {
	Version  int       `json:"version"`
	Services []Service `json:"services"`
}

func save(path string, services []Service) error {
	if services == nil {
		services = []Service{}
	}
	data, err := json.MarshalIndent(durable{Version: stateVersion, Services: services}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create the directory of %s: %w", path, err)
	}
	return paths.WriteFileAtomic(path, append(data, '\n'), 0o644)
}

// load reads the durable record set; a missing file is an empty set.
func load(path string) ([]Service, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	// Fields other than the identity (backends, readiness, from an older
	// or richer writer) are dropped: they would be stale.
	var d durable
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("%s is not a Service DNS record set: %w", path, err)
	}
	if d.Version != stateVersion {
		return nil, fmt.Errorf("%s has version %d; this agent reads version %d", path, d.Version, stateVersion)
	}
	return d.Services, nil
}
