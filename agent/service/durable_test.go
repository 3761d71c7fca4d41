// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package service_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"podmin.dev/podmin/agent/service"
)

// TestRestoresDurableDNSAtStartup stops a server and starts another on the
// same durable file: the second answers before any Update, and the file
// holds Service identities and nothing that names a backend.
func TestRestoresDurableDNSAtStartup(t *testing.T) {
	path := statePath(t)
	want := services([2]string{"product", "database"}, [2]string{"default", "web"})
	first := service.New(service.Config{Addr: "127.0.0.1:0", StatePath: path, Cluster: cluster})
	if err := first.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := first.Update(want); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := first.Stop(ctx); err != nil {
		t.Fatal(err)
	}

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var raw struct {
		Version  int              `json:"version"`
		Services []map[string]any `json:"services"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	for _, s := range raw.Services {
		keys := make([]string, 0, len(s))
		for k := range s {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if !slices.Equal(keys, []string{"name", "namespace", "vip"}) {
			t.Errorf("durable entry has fields %v, want only name, namespace and vip", keys)
		}
	}

	second := startServer(t, service.Config{StatePath: path, Cluster: cluster})
	for _, s := range want {
		if got := vipOf(t, query(t, "udp", second.Addr(), s.FQDN(), dns.TypeAAAA, false)); got != s.VIP {
			t.Errorf("restored %s: %v, want %v", s, got, s.VIP)
		}
	}
	if r := query(t, "tcp", second.Addr(), "cache.product.svc.cluster.local.", dns.TypeAAAA, false); r.Rcode != dns.RcodeNameError {
		t.Errorf("unknown Service after restore: %s", dns.RcodeToString[r.Rcode])
	}
	// Removing a Service removes it from the durable copy too.
	if err := second.Update(want[:1]); err != nil {
		t.Fatal(err)
	}
	third := startServer(t, service.Config{StatePath: path})
	if got := third.Services(); !slices.Equal(got, want[:1]) {
		t.Errorf("third start restored %v", got)
	}
	if r := query(t, "udp", third.Addr(), want[1].FQDN(), dns.TypeAAAA, false); r.Rcode != dns.RcodeNameError {
		t.Errorf("removed Service %s still resolves after restart", want[1])
	}
}

// TestRestoreDropsBackends restores a record set written with backend
// addresses (as a snapshot would carry them): the identities come back,
// the backends do not, and the rewritten file has none.
func TestRestoreDropsBackends(t *testing.T) {
	path := statePath(t)
	db := services([2]string{"product", "database"})[0]
	content := `{"version":1,"services":[{"namespace":"product","name":"database","vip":"` + db.VIP.String() +
		`","backends":["2600:1f18::a","2600:1f18::b"],"ready":true}]}`
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, service.Config{StatePath: path, Cluster: cluster})
	if got := s.Services(); !slices.Equal(got, []service.Service{db}) {
		t.Fatalf("restored %v", got)
	}
	if got := vipOf(t, query(t, "udp", s.Addr(), db.FQDN(), dns.TypeAAAA, false)); got != db.VIP {
		t.Errorf("answer %v, want the VIP %v, never a backend", got, db.VIP)
	}
	if data, _ := os.ReadFile(path); strings.Contains(string(data), "2600:1f18") || strings.Contains(string(data), "ready") {
		t.Errorf("the rewritten durable file keeps backend state:\n%s", data)
	}
}

// TestUnusableDurableFileStartsEmpty covers files a restart must not
// serve: corrupt, from another format version, or from another cluster. The server starts empty, logs why, and the next
// Update rewrites the file.
func TestUnusableDurableFileStartsEmpty(t *testing.T) {
	other := service.Identity("staging", "product", "database")
	cases := map[string]string{
		"corrupt":       `{"version":1,"services":[{"namespace":"product"`,
		"version":       `{"version":2,"services":[]}`,
		"bad name":      `{"version":1,"services":[{"namespace":"Product","name":"database","vip":"fd50:6f64:6d69::1"}]}`,
		"other cluster": `{"version":1,"services":[{"namespace":"product","name":"database","vip":"` + other.VIP.String() + `"}]}`,
	}
	for name, content := range cases {
		t.Run(name, func(t *testing.T) {
			path := statePath(t)
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			s := startServer(t, service.Config{StatePath: path, Cluster: cluster, Log: slog.New(slog.NewTextHandler(&logs, nil))})
			if len(s.Services()) != 0 {
				t.Fatalf("served %v from an unusable file", s.Services())
			}
			if !strings.Contains(logs.String(), "service DNS starts empty: the durable record set is unusable") {
				t.Errorf("log does not say why:\n%s", logs.String())
			}
			if r := query(t, "udp", s.Addr(), "database.product.svc.cluster.local.", dns.TypeAAAA, false); r.Rcode != dns.RcodeNameError {
				t.Errorf("rcode %s", dns.RcodeToString[r.Rcode])
			}
			if err := s.Update(services([2]string{"product", "database"})); err != nil {
				t.Fatal(err)
			}
			if data, _ := os.ReadFile(path); !strings.Contains(string(data), `"version": 1`) || strings.Contains(string(data), "backends") {
				t.Errorf("Update did not rewrite the file:\n%s", data)
			}
		})
	}
}

// TestDurableWriteFailureStillServes makes the durable directory
// unwritable: the new set is served and the error says the copy is old.
func TestDurableWriteFailureStillServes(t *testing.T) {
	dir := t.TempDir()
	blocker := filepath.Join(dir, "file")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, service.Config{StatePath: filepath.Join(blocker, "services.json")})
	err := s.Update(services([2]string{"product", "database"}))
	if err == nil || !strings.HasPrefix(err.Error(), "service DNS serves the 1 new records, but a restart would restore older ones") {
		t.Fatalf("error %v", err)
	}
	vipOf(t, query(t, "udp", s.Addr(), "database.product.svc.cluster.local.", dns.TypeAAAA, false))
}
