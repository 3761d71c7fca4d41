// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package objstoretest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"podmin.dev/podmin/internal/syncio"
)

// VersityGWEnv names an existing versitygw executable to use instead of
// building one.
const VersityGWEnv = "PODMIN_VERSITYGW"

// versityGWModule is the tool pinned in tools/go.mod, the module of
// test-only programs beside Podmin's own; its version keys the cache.
const versityGWModule = "github.com/versity/versitygw"

// toolsDir is the tools module's directory below the main module's root.
const toolsDir = "tools"

// S3Server is a versitygw process serving the S3 API from a posix
// directory. It lives until the test that started it ends. It knows nothing
// about Podmin's S3 client (this package depends on no backend); the
// s3store/s3storetest package turns it into s3store.Buckets.
type S3Server struct {
	// Endpoint is the server's base URL, e.g. http://127.0.0.1:40123.
	Endpoint string
	// AccessKey and SecretKey are the root user's credentials.
	AccessKey, SecretKey string
	// Region is the region versitygw reports (us-east-1).
	Region string
	// Dir is the posix root: one directory per bucket.
	Dir string
	// CAFile is the PEM certificate a TLS server (StartVersityGWTLS)
	// presents, to trust as a CA bundle; empty for plain HTTP.
	CAFile string

	buckets atomic.Int64
}

// StartVersityGW starts a versitygw server for t, building the binary first
// if needed, and stops it when t ends. It fails t rather than skip when
// the binary cannot be had: these tests are the evidence that the S3 code
// works.
func StartVersityGW(t testing.TB) *S3Server {
	t.Helper()
	return startVersityGW(t, false)
}

// UseVersityGW starts versitygw and points the AWS SDK's standard
// configuration at it through the environment, as an operator would
// (AWS_ENDPOINT_URL_S3, keys, region; no shared files, no instance
// metadata), for tests that open the aws provider as the CLI does.
func UseVersityGW(t *testing.T) *S3Server {
	t.Helper()
	srv := StartVersityGW(t)
	t.Setenv("AWS_ENDPOINT_URL_S3", srv.Endpoint)
	t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
	t.Setenv("AWS_REGION", srv.Region)
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	return srv
}

// StartVersityGWTLS is StartVersityGW serving HTTPS with a self-signed
// certificate for 127.0.0.1, found in the server's CAFile.
func StartVersityGWTLS(t testing.TB) *S3Server {
	t.Helper()
	return startVersityGW(t, true)
}

func startVersityGW(t testing.TB, useTLS bool) *S3Server {
	t.Helper()
	bin := VersityGWBinary(t)
	dir := xattrDir(t)
	s := &S3Server{
		AccessKey: "podmin-test-access",
		SecretKey: "podmin-test-secret-0123456789",
		Region:    "us-east-1",
		Dir:       dir,
	}
	var extra []string
	scheme := "http://"
	if useTLS {
		cert, key := selfSigned(t)
		extra = []string{"--cert", cert, "--key", key}
		s.CAFile = cert
		scheme = "https://"
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		// A free port can be taken between Close and versitygw's bind;
		// a few attempts make that race irrelevant.
		addr, err := freeAddr()
		if err != nil {
			t.Fatalf("versitygw: pick a port: %v", err)
		}
		start := time.Now()
		if lastErr = s.start(t, bin, addr, extra); lastErr == nil {
			s.Endpoint = scheme + addr
			t.Logf("versitygw %s serving %s, ready in %v", s.Endpoint, dir, time.Since(start).Round(time.Millisecond))
			return s
		}
	}
	t.Fatalf("versitygw: %v", lastErr)
	return nil
}

// start runs bin on addr and waits until it accepts connections.
func (s *S3Server) start(t testing.TB, bin, addr string, extra []string) error {
	args := append([]string{"--port", addr, "--quiet"}, extra...)
	cmd := exec.Command(bin, append(args, "posix", s.Dir)...)
	cmd.Env = append(os.Environ(),
		"ROOT_ACCESS_KEY_ID="+s.AccessKey,
		"ROOT_SECRET_ACCESS_KEY="+s.SecretKey,
	)
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// Kill the server if the test binary dies without running cleanups
	// (panic, test timeout).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop := func() {
		_ = cmd.Process.Kill()
		<-exited
	}
	const poll = 10 * time.Millisecond
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			t.Cleanup(func() {
				stop()
				if t.Failed() && out.Len() > 0 {
					t.Logf("versitygw output:\n%s", out.String())
				}
			})
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("%s exited before serving %s: %s", bin, addr, out.String())
		case <-time.After(poll):
		}
		if time.Now().After(deadline) {
			stop()
			return fmt.Errorf("%s not listening on %s after 30s: %s", bin, addr, out.String())
		}
	}
}

// BucketName returns a valid S3 bucket name derived from t's name that no
// earlier call on this server returned.
func (s *S3Server) BucketName(t testing.TB) string {
	n := s.buckets.Add(1)
	var b strings.Builder
	dash := true
	for _, r := range strings.ToLower(t.Name()) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			dash = false
		} else if !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	name := strings.Trim(b.String(), "-")
	if len(name) > 40 {
		name = strings.Trim(name[:40], "-")
	}
	return fmt.Sprintf("pt-%s-%d", name, n)
}

// VersityGWBinary returns the path of a versitygw executable: $PODMIN_VERSITYGW
// if set, else one built from the version pinned in tools/go.mod into the user
// cache directory, once per machine. Concurrent test processes (go test
// ./... runs packages in parallel) serialise the build with a file lock.
func VersityGWBinary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(VersityGWEnv); p != "" {
		fi, err := os.Stat(p)
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			t.Fatalf("%s=%q is not an executable file (%v): unset it to build versitygw from tools/go.mod", VersityGWEnv, p, err)
		}
		return p
	}
	root, version := goModule(t)
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatalf("versitygw: no cache directory (%v): set %s to a versitygw binary", err, VersityGWEnv)
	}
	dir := filepath.Join(cache, "podmin-test", "versitygw-"+version)
	bin := filepath.Join(dir, "versitygw")
	if isFile(bin) {
		return bin
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("versitygw: %v", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatalf("versitygw: %v", err)
	}
	defer lock.Close()
	// Blocks while another test process builds; the lock dies with it.
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatalf("versitygw: lock %s: %v", lock.Name(), err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if isFile(bin) {
		return bin
	}
	tmp := fmt.Sprintf("%s.tmp-%d", bin, os.Getpid())
	start := time.Now()
	build := exec.Command("go", "build", "-o", tmp, versityGWModule+"/cmd/versitygw")
	build.Dir = filepath.Join(root, toolsDir)
	if out, err := build.CombinedOutput(); err != nil {
		os.Remove(tmp)
		t.Fatalf("versitygw: %s in %s: %v\n%s\nset %s to a prebuilt binary to skip the build",
			strings.Join(build.Args, " "), root, err, out, VersityGWEnv)
	}
	if err := os.Rename(tmp, bin); err != nil {
		t.Fatalf("versitygw: %v", err)
	}
	t.Logf("versitygw %s built into %s in %v", version, bin, time.Since(start).Round(time.Millisecond))
	return bin
}

// goModule returns the main module's root and the versitygw version that
// its tools module pins.
func goModule(t testing.TB) (root, version string) {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	gomod := strings.TrimSpace(string(out))
	if err != nil || gomod == "" || gomod == os.DevNull {
		t.Fatalf("versitygw: find go.mod with \"go env GOMOD\" (got %q, %v): run the tests inside the podmin module or set %s",
			gomod, err, VersityGWEnv)
	}
	root = filepath.Dir(gomod)
	list := exec.Command("go", "list", "-m", "-f", "{{.Version}}", versityGWModule)
	list.Dir = filepath.Join(root, toolsDir)
	out, err = list.CombinedOutput()
	version = strings.TrimSpace(string(out))
	if err != nil || version == "" {
		t.Fatalf("versitygw: %s in %s: %v\n%s\nis it pinned as a tool in tools/go.mod?", strings.Join(list.Args, " "), list.Dir, err, out)
	}
	return root, version
}

// xattrDir returns a fresh directory whose filesystem takes user xattrs,
// where the posix backend keeps object metadata (ETags among them).
// t.TempDir is tried first; the user cache directory is the fallback for
// a tmpfs-less /tmp on a filesystem without xattrs.
func xattrDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	errTemp := probeXattr(dir)
	if errTemp == nil {
		return dir
	}
	cache, err := os.UserCacheDir()
	if err == nil {
		base := filepath.Join(cache, "podmin-test", "versitygw-data")
		if err = os.MkdirAll(base, 0o755); err == nil {
			if dir, err = os.MkdirTemp(base, "gw-"); err == nil {
				t.Cleanup(func() { os.RemoveAll(dir) })
				if err = probeXattr(dir); err == nil {
					return dir
				}
			}
		}
	}
	t.Fatalf("versitygw needs user xattrs: %s: %v; %v: set TMPDIR to a directory on ext4, xfs or tmpfs", os.TempDir(), errTemp, err)
	return ""
}

// probeXattr sets a user xattr on a file in dir.
func probeXattr(dir string) error {
	p := filepath.Join(dir, ".xattr-probe")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		return err
	}
	defer os.Remove(p)
	if err := syscall.Setxattr(p, "user.podmin.probe", []byte("1"), 0); err != nil {
		return fmt.Errorf("setxattr: %w", err)
	}
	return nil
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key
// into a temporary directory and returns both paths.
func selfSigned(t testing.TB) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "versitygw test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// freeAddr returns a loopback address with a port nobody listens on now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// isFile reports whether p is a regular file.
func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// syncBuffer collects a child's output from its copy goroutines.
type syncBuffer = syncio.Buffer
