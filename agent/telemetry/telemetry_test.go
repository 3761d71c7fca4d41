// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package telemetry

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"podmin.dev/podmin/agent/workload"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/local"
	"podmin.dev/podmin/internal/pki"
	"podmin.dev/podmin/internal/syncio"
)

var t0 = time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)

// clock is a settable test clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// logBuffer collects slog output.
type logBuffer struct{ syncio.Buffer }

func (l *logBuffer) Logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

func newCA(t *testing.T, name string, now time.Time, life time.Duration) (*x509.Certificate, ed25519.PrivateKey) {
	t.Helper()
	key, err := pki.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := pki.NewCA(rand.Reader, key, pki.CASpec{CommonName: name, Lifetime: life}, now)
	if err != nil {
		t.Fatal(err)
	}
	return ca, key
}

// fakeIssuer signs with a real CA exactly as workload.Manager.IssueLeaf
// does, and counts its leaves.
type fakeIssuer struct {
	ca     *x509.Certificate
	key    ed25519.PrivateKey
	now    func() time.Time
	issued int
}

func (f *fakeIssuer) IssueLeaf(spec pki.LeafSpec) (workload.Leaf, error) {
	key, err := pki.GenerateKey(rand.Reader)
	if err != nil {
		return workload.Leaf{}, err
	}
	cert, err := pki.Issue(rand.Reader, f.ca, f.key, key.Public().(ed25519.PublicKey), spec, f.now())
	if err != nil {
		return workload.Leaf{}, err
	}
	f.issued++
	return workload.Leaf{Cert: cert, Key: key, Bundle: pki.EncodeBundlePEM([]*x509.Certificate{f.ca})}, nil
}

func TestValidateCABundle(t *testing.T) {
	ca, caKey := newCA(t, "exporter CA", t0, 365*24*time.Hour)
	ca2, _ := newCA(t, "exporter CA 2", t0, 365*24*time.Hour)
	old, _ := newCA(t, "expired CA", t0.Add(-400*24*time.Hour), 24*time.Hour)
	leafKey, _ := pki.GenerateKey(rand.Reader)
	leaf, err := pki.Issue(rand.Reader, ca, caKey, leafKey.Public().(ed25519.PublicKey), pki.LeafSpec{CommonName: "otlp.example.com", DNSNames: []string{"otlp.example.com"}, ServerAuth: true, Lifetime: time.Hour}, t0)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, _ := pki.EncodeKeyPEM(leafKey)
	good := pki.EncodeBundlePEM([]*x509.Certificate{ca, ca2})
	if certs, err := ValidateCABundle(good, t0); err != nil || len(certs) != 2 {
		t.Fatalf("good bundle: %v", err)
	}
	if _, err := ValidateCABundle(pki.EncodeBundlePEM([]*x509.Certificate{old, ca}), t0); err != nil {
		t.Fatalf("a bundle with one retired CA: %v", err)
	}
	for name, tc := range map[string]struct {
		data []byte
		want string
	}{
		"leaf":        {pki.EncodeCertPEM(leaf.Raw), "is not a CA certificate"},
		"leaf in CAs": {append(append([]byte{}, good...), pki.EncodeCertPEM(leaf.Raw)...), "certificate 3"},
		"garbage":     {[]byte("not a certificate at all"), "is not PEM"},
		"trailing":    {append(append([]byte{}, good...), "junk"...), "is not PEM"},
		"empty":       {nil, "the object is empty"},
		"blank":       {[]byte("\n\n"), "the object is empty"},
		"private key": {append(append([]byte{}, good...), keyPEM...), "where a CERTIFICATE was expected"},
		"expired":     {pki.EncodeCertPEM(old.Raw), "every certificate has expired"},
		"oversized":   {append(append([]byte{}, good...), bytes.Repeat([]byte("\n"), MaxCABundle)...), "more than the"},
	} {
		_, err := ValidateCABundle(tc.data, t0)
		if !errors.Is(err, ErrInvalidBundle) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
}

func TestCABundleKeepsTheLastGoodOne(t *testing.T) {
	ca, caKey := newCA(t, "exporter CA", t0, 365*24*time.Hour)
	ca2, _ := newCA(t, "exporter CA 2", t0, 365*24*time.Hour)
	leafKey, _ := pki.GenerateKey(rand.Reader)
	leaf, _ := pki.Issue(rand.Reader, ca, caKey, leafKey.Public().(ed25519.PublicKey), pki.LeafSpec{CommonName: "x", ClientAuth: true, Lifetime: time.Hour}, t0)
	var object []byte
	var fetchErr error
	logs := &logBuffer{}
	path := filepath.Join(t.TempDir(), "telemetry", "ca.pem")
	b := NewCABundle(CABundleOptions{
		Fetch: func(context.Context) ([]byte, error) { return object, fetchErr },
		Path:  path, Now: func() time.Time { return t0 }, Logger: logs.Logger(),
	})
	ctx := t.Context()
	good := pki.EncodeCertPEM(ca.Raw)
	object = good
	if changed, err := b.Refresh(ctx); err != nil || !changed {
		t.Fatalf("first install: %v %v", changed, err)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o644 {
		t.Fatalf("installed bundle: %v %v", st, err)
	}
	if changed, err := b.Refresh(ctx); err != nil || changed {
		t.Fatalf("unchanged refresh: %v %v", changed, err)
	}
	for name, tc := range map[string]struct {
		data   []byte
		err    error
		reason string
	}{
		"leaf":    {data: pki.EncodeCertPEM(leaf.Raw), reason: "is not a CA certificate"},
		"garbage": {data: []byte("<html>503</html>"), reason: "is not PEM"},
		"empty":   {data: []byte{}, reason: "the object is empty"},
		"fetch":   {err: errors.New("AccessDenied"), reason: "fetch the CA bundle: AccessDenied"},
	} {
		object, fetchErr = tc.data, tc.err
		before := len(logs.String())
		changed, err := b.Refresh(ctx)
		if err == nil || changed {
			t.Errorf("%s: installed (%v, %v)", name, changed, err)
		}
		if got, _ := os.ReadFile(path); !bytes.Equal(got, good) {
			t.Errorf("%s: the last good bundle was replaced", name)
		}
		if line := logs.String()[before:]; !strings.Contains(line, "keeping the last good one") || !strings.Contains(line, tc.reason) {
			t.Errorf("%s: log %q lacks %q", name, line, tc.reason)
		}
	}
	object, fetchErr = pki.EncodeBundlePEM([]*x509.Certificate{ca, ca2}), nil
	if changed, err := b.Refresh(ctx); err != nil || !changed {
		t.Fatalf("rotation: %v %v", changed, err)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, object) {
		t.Fatal("the new bundle was not installed")
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Fatalf("temporary files left: %v", entries)
	}
}

func TestCABundleRunRefreshesPeriodically(t *testing.T) {
	ca, _ := newCA(t, "exporter CA", t0, 365*24*time.Hour)
	calls := make(chan struct{}, 16)
	b := NewCABundle(CABundleOptions{
		Fetch: func(context.Context) ([]byte, error) {
			calls <- struct{}{}
			return pki.EncodeCertPEM(ca.Raw), nil
		},
		Path: filepath.Join(t.TempDir(), "ca.pem"), Now: func() time.Time { return t0 }, Interval: time.Millisecond,
	})
	ctx, cancel := context.WithCancel(t.Context())
	changes := 0
	done := make(chan struct{})
	go func() { b.Run(ctx, func(context.Context) { changes++ }); close(done) }()
	for range 3 {
		select {
		case <-calls:
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not refresh")
		}
	}
	cancel()
	<-done
	if changes != 1 {
		t.Fatalf("onChange ran %d times for one new bundle", changes)
	}
}

func newIdentity(t *testing.T, clk *clock, restarts *int) (*Identity, *fakeIssuer, string) {
	t.Helper()
	ca, key := newCA(t, "prod workload CA", clk.Now(), 365*24*time.Hour)
	iss := &fakeIssuer{ca: ca, key: key, now: clk.Now}
	dir := filepath.Join(t.TempDir(), "run", "podmin", "telemetry")
	id, err := NewIdentity(IdentityOptions{
		Dir: dir, Cluster: "prod", NodeID: "i-0abc", Issuer: iss, UID: -1, GID: -1, Now: clk.Now,
		Restart: func(context.Context) error { *restarts++; return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	return id, iss, dir
}

func TestIdentityIsClientOnlyAndRenews(t *testing.T) {
	clk := &clock{now: t0}
	restarts := 0
	id, iss, dir := newIdentity(t, clk, &restarts)
	ctx := t.Context()
	first, err := id.Maintain(ctx)
	if err != nil || !first.Renewed || restarts != 1 {
		t.Fatalf("first pass: %+v %v restarts=%d", first, err, restarts)
	}
	for _, p := range []string{first.Cert, first.Key} {
		st, err := os.Stat(p)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v", p, st, err)
		}
		if !strings.HasPrefix(p, filepath.Join(dir, GenerationsDir)+"/") {
			t.Fatalf("%s is not a concrete generation path", p)
		}
	}
	pair, err := tls.LoadX509KeyPair(first.Cert, first.Key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(pair.Certificate[0])
	if len(leaf.URIs) != 1 || leaf.URIs[0].String() != "spiffe://prod.podmin.internal/system/otel-logs/node/i-0abc" {
		t.Fatalf("URI SANs %v", leaf.URIs)
	}
	if !slices.Equal(leaf.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) || leaf.NotAfter.Sub(t0) > 24*time.Hour {
		t.Fatalf("usages %v, lifetime until %s", leaf.ExtKeyUsage, leaf.NotAfter)
	}

	// A valid generation is kept.
	if r, err := id.Maintain(ctx); err != nil || r.Renewed || r.Generation != first.Generation || restarts != 1 || iss.issued != 1 {
		t.Fatalf("second pass: %+v %v", r, err)
	}
	// Within six hours of expiry it is renewed and the old one retained.
	clk.Add(18*time.Hour + time.Minute)
	second, err := id.Maintain(ctx)
	if err != nil || !second.Renewed || second.Generation == first.Generation || restarts != 2 || !strings.Contains(second.Reason, "renewal window") {
		t.Fatalf("renewal: %+v %v", second, err)
	}
	if _, err := os.Stat(first.Cert); err != nil {
		t.Fatal("the previous generation was not retained during the switch")
	}
	clk.Add(time.Minute)
	// Repairs: a wrong mode, a corrupt certificate, a missing link.
	breakages := map[string]func(Files){
		"mode":    func(f Files) { _ = os.Chmod(f.Key, 0o644) },
		"corrupt": func(f Files) { _ = os.WriteFile(f.Cert, []byte("garbage"), 0o600) },
		"foreign key": func(f Files) {
			k, _ := pki.GenerateKey(rand.Reader)
			p, _ := pki.EncodeKeyPEM(k)
			_ = os.WriteFile(f.Key, p, 0o600)
		},
		"link": func(Files) { _ = os.Remove(filepath.Join(dir, CurrentLink)) },
	}
	prev := second
	for _, name := range []string{"mode", "corrupt", "foreign key", "link"} {
		breakages[name](prev.Files)
		r, err := id.Maintain(ctx)
		if err != nil || !r.Renewed || r.Generation == prev.Generation {
			t.Fatalf("%s: %+v %v", name, r, err)
		}
		prev = r
	}
	gens, _ := os.ReadDir(filepath.Join(dir, GenerationsDir))
	if len(gens) > 2 {
		t.Fatalf("%d generations kept, want the current and one previous", len(gens))
	}
}

// TestTelemetryLeafAgainstAnOTLPReceiver runs a real TLS OTLP/HTTP
// endpoint that requires a client certificate from the workload CA: the
// telemetry leaf is accepted as a client, and it cannot serve TLS
// because it has no server-auth usage.
func TestTelemetryLeafAgainstAnOTLPReceiver(t *testing.T) {
	clk := &clock{now: time.Now()}
	restarts := 0
	id, iss, _ := newIdentity(t, clk, &restarts)
	files, err := id.Maintain(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	clientPair, err := tls.LoadX509KeyPair(files.Cert, files.Key)
	if err != nil {
		t.Fatal(err)
	}
	workloadCAs := x509.NewCertPool()
	workloadCAs.AddCert(iss.ca)

	var mu sync.Mutex
	var got []string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path != "/v1/logs" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "unsupported", http.StatusUnsupportedMediaType)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		peer := ""
		if len(r.TLS.PeerCertificates) > 0 {
			peer = r.TLS.PeerCertificates[0].URIs[0].String()
		}
		got = append(got, peer+" "+string(body))
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: workloadCAs, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	defer srv.Close()
	serverCAs := x509.NewCertPool()
	serverCAs.AddCert(srv.Certificate())

	post := func(certs []tls.Certificate) error {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: serverCAs, Certificates: certs}}}
		resp, err := c.Post(srv.URL+"/v1/logs", "application/x-protobuf", strings.NewReader("records"))
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return errors.New(resp.Status)
		}
		return nil
	}
	if err := post([]tls.Certificate{clientPair}); err != nil {
		t.Fatalf("mTLS export: %v", err)
	}
	if err := post(nil); err == nil {
		t.Fatal("the receiver accepted a client without a certificate")
	}
	if len(got) != 1 || got[0] != "spiffe://prod.podmin.internal/system/otel-logs/node/i-0abc records" {
		t.Fatalf("received %q", got)
	}

	// The same leaf cannot authenticate a server: it has no server-auth
	// usage, so a client verifying a server chain refuses it.
	leaf, _ := x509.ParseCertificate(clientPair.Certificate[0])
	_, err = leaf.Verify(x509.VerifyOptions{Roots: workloadCAs, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	var inv x509.CertificateInvalidError
	if !errors.As(err, &inv) || inv.Reason != x509.IncompatibleUsage {
		t.Fatalf("the telemetry leaf as a server certificate: %v, want an incompatible-usage error", err)
	}
}

// The agent's workload manager is the production Issuer.
var _ Issuer = (*workload.Manager)(nil)

func TestFetchObjectReadsTheExactKey(t *testing.T) {
	ca, _ := newCA(t, "exporter CA", time.Now(), 365*24*time.Hour)
	store := local.Open(filepath.Join(t.TempDir(), "ca-bucket"))
	if err := store.CreateBucket(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Put(t.Context(), "otel/ca.pem", pki.EncodeCertPEM(ca.Raw)); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ca.pem")
	b := NewCABundle(CABundleOptions{Fetch: FetchObject(store, "otel/ca.pem"), Path: path})
	if changed, err := b.Refresh(t.Context()); err != nil || !changed {
		t.Fatalf("%v %v", changed, err)
	}
	missing := NewCABundle(CABundleOptions{Fetch: FetchObject(store, "otel/other.pem"), Path: path})
	if _, err := missing.Refresh(t.Context()); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("missing object: %v", err)
	}
}
