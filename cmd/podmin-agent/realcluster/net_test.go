// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package realcluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"podmin.dev/podmin/cmd/podmin-agent/internal/e2enode"
)

// The cluster's network: one /64 on the router's bridge holds the router,
// every node and the client's addresses; the router routes each node's
// Pod /80 to the node, as AWS routes a delegated prefix to its ENI.
var (
	routerAddr = netip.MustParseAddr("2001:db8:0:e2e::1")
	lanBits    = 64
	// vipRange holds every Service VIP (agent/service): the client
	// reaches it through the node its source address names.
	vipRange = netip.MustParsePrefix("fd50:6f64:6d69::/64")
)

// nodeAddr is node i's address (i from 1), 2001:db8:0:e2e::101 for node 1.
func nodeAddr(i int) netip.Addr { return indexed(0x100, i) }

// clientAddr is the client's source address for traffic entering the
// cluster through node i.
func clientAddr(i int) netip.Addr { return indexed(0xc00, i) }

func indexed(base, i int) netip.Addr {
	b := routerAddr.As16()
	v := base + i
	b[14], b[15] = byte(v>>8), byte(v)
	return netip.AddrFrom16(b)
}

// podPrefix is node i's Pod /80: 2001:db8:1:<i>::/80.
func podPrefix(i int) netip.Prefix {
	return netip.MustParsePrefix(fmt.Sprintf("2001:db8:1:%x::/80", i))
}

// holder is a process holding a network namespace (and, for a node, a
// mount namespace) of its own: the test re-executed in hold mode. The
// node's daemons enter its namespaces with nsenter; the test's own
// sockets in it are made on a thread moved there (do).
type holder struct {
	name  string
	cmd   *exec.Cmd
	stdin io.Closer // closing it ends the holder
	netns int       // an open descriptor of its network namespace
}

// hold is the holder's side: in its new namespaces it binds a node root
// over /run and /var (root "-": nothing to bind), turns on IPv6
// forwarding, says it is ready on descriptor 3 and waits for its standard
// input to close.
func hold(root string) int {
	if root != "-" {
		if err := e2enode.BindRoot(root); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	if err := os.WriteFile("/proc/sys/net/ipv6/conf/all/forwarding", []byte("1"), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ready := os.NewFile(3, "ready")
	fmt.Fprintln(ready, "ready")
	ready.Close()
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// spawnHolder starts a holder with new namespaces (syscall.CLONE_NEW*
// flags) and waits until it is ready; root is the node root it binds, or
// "-".
func spawnHolder(name, root string, flags uintptr, logs string) (*holder, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	log, err := os.Create(logs + "/holder-" + name + ".log")
	if err != nil {
		w.Close()
		return nil, err
	}
	defer log.Close()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), envHold+"="+root)
	cmd.ExtraFiles = []*os.File{w}
	cmd.Stdout, cmd.Stderr = log, log
	stdin, err := cmd.StdinPipe()
	if err != nil {
		w.Close()
		return nil, err
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: flags, Pdeathsig: syscall.SIGKILL}
	err = cmd.Start()
	w.Close()
	if err != nil {
		return nil, fmt.Errorf("start the holder of %s: %w", name, err)
	}
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		b, _ := os.ReadFile(log.Name())
		return nil, fmt.Errorf("the holder of %s did not get ready (%q, %v): %s", name, line, err, b)
	}
	fd, err := unix.Open(fmt.Sprintf("/proc/%d/ns/net", cmd.Process.Pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, err
	}
	return &holder{name: name, cmd: cmd, stdin: stdin, netns: fd}, nil
}

// pid is the holder's process ID, the target of nsenter.
func (h *holder) pid() int { return h.cmd.Process.Pid }

// enter is the nsenter prefix that runs a program in the holder's
// network namespace and, with mount, its mount namespace.
func (h *holder) enter(mount bool) []string {
	argv := []string{"nsenter", "-t", strconv.Itoa(h.pid()), "-n"}
	if mount {
		argv = append(argv, "-m")
	}
	return append(argv, "--")
}

// stop ends the holder and waits for it.
func (h *holder) stop() {
	_ = h.stdin.Close()
	done := make(chan struct{})
	go func() { _ = h.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = h.cmd.Process.Kill()
		<-done
	}
	_ = unix.Close(h.netns)
}

// do runs fn on a thread in the holder's network namespace: every socket
// fn makes belongs to that namespace (and keeps belonging to it after).
func (h *holder) do(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer unix.Close(self)
		if err := unix.Setns(h.netns, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("enter the network namespace of %s: %w", h.name, err)
			return
		}
		err = fn()
		if serr := unix.Setns(self, unix.CLONE_NEWNET); serr != nil {
			// The thread stays locked, so it ends with this goroutine
			// instead of running others in the wrong namespace.
			errc <- errors.Join(err, serr)
			return
		}
		runtime.UnlockOSThread()
		errc <- err
	}()
	return <-errc
}

// dial connects from the holder's network namespace to addr (a TCP
// "[ipv6]:port"), from local when it is valid, as an ordinary client does:
// with lport 0 the kernel picks the source port when it connects
// (IP_BIND_ADDRESS_NO_PORT), reusing ports as any client's connect does;
// lport reuses that port on purpose (proof 5). The source port is known
// even when the connection fails (*dialError).
func (h *holder) dial(ctx context.Context, network, addr string, local netip.Addr, lport int) (net.Conn, error) {
	if !local.IsValid() {
		var c net.Conn
		err := h.do(func() error {
			var err error
			c, err = (&net.Dialer{Timeout: requestTimeout}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
	remote, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, err
	}
	// The connection gives up just before the request does, so a
	// connection that never opened still tells its source port.
	deadline := time.Now().Add(requestTimeout - 50*time.Millisecond)
	if d, ok := ctx.Deadline(); ok && d.Add(-50*time.Millisecond).Before(deadline) {
		deadline = d.Add(-50 * time.Millisecond)
	}
	var c net.Conn
	err = h.do(func() error {
		var err error
		c, err = connect(local, lport, remote, deadline)
		return err
	})
	return c, err
}

// dialError is a failed connection with the source port it had.
type dialError struct {
	port int
	err  error
}

func (e *dialError) Error() string { return fmt.Sprintf("connect from port %d: %v", e.port, e.err) }
func (e *dialError) Unwrap() error { return e.err }

// connect opens a TCP connection from local (port lport, 0: the kernel's
// choice at connect) to remote by deadline, on the calling thread's
// network namespace.
func connect(local netip.Addr, lport int, remote netip.AddrPort, deadline time.Time) (net.Conn, error) {
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	fail := func(port int, err error) (net.Conn, error) {
		_ = unix.Close(fd)
		return nil, &dialError{port: port, err: err}
	}
	if lport != 0 {
		err = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
	} else {
		err = unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_BIND_ADDRESS_NO_PORT, 1)
	}
	if err != nil {
		return fail(lport, err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet6{Addr: local.As16(), Port: lport}); err != nil {
		return fail(lport, fmt.Errorf("bind [%s]:%d: %w", local, lport, err))
	}
	err = unix.Connect(fd, &unix.SockaddrInet6{Addr: remote.Addr().As16(), Port: int(remote.Port())})
	port := lport
	if sa, serr := unix.Getsockname(fd); serr == nil {
		port = sa.(*unix.SockaddrInet6).Port
	}
	if err != nil && !errors.Is(err, unix.EINPROGRESS) {
		return fail(port, err)
	}
	for err != nil {
		wait := time.Until(deadline)
		if wait <= 0 {
			return fail(port, os.ErrDeadlineExceeded)
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
		n, perr := unix.Poll(fds, int(wait/time.Millisecond)+1)
		if perr != nil && !errors.Is(perr, unix.EINTR) {
			return fail(port, perr)
		}
		if n == 0 {
			continue
		}
		soerr, gerr := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
		switch {
		case gerr != nil:
			return fail(port, gerr)
		case soerr != 0:
			return fail(port, unix.Errno(soerr))
		}
		err = nil
	}
	f := os.NewFile(uintptr(fd), "tcp")
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		return nil, &dialError{port: port, err: err}
	}
	return c, nil
}

// ip runs ip with args in the calling namespace (prefix nil) or through
// prefix (a holder's enter).
func ip(prefix []string, args ...string) error {
	argv := append(append(append([]string(nil), prefix...), "ip"), args...)
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// ips runs each argument list with ip, stopping at the first failure.
func ips(prefix []string, cmds ...[]string) error {
	for _, c := range cmds {
		if err := ip(prefix, c...); err != nil {
			return err
		}
	}
	return nil
}

// routerNetwork makes the test's own namespace the router: a bridge with
// the router's address, forwarding on.
func routerNetwork() error {
	if err := ips(nil,
		[]string{"link", "set", "lo", "up"},
		[]string{"link", "add", "br0", "type", "bridge"},
		[]string{"link", "set", "br0", "up"},
		[]string{"-6", "addr", "add", fmt.Sprintf("%s/%d", routerAddr, lanBits), "dev", "br0", "nodad"},
	); err != nil {
		return err
	}
	return os.WriteFile("/proc/sys/net/ipv6/conf/all/forwarding", []byte("1"), 0o644)
}

// plug links holder h to the bridge: its eth0 gets addrs, its default
// route goes through the router; port names the bridge's end.
func plug(h *holder, port string, addrs ...netip.Addr) error {
	if err := ips(nil,
		[]string{"link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", strconv.Itoa(h.pid())},
		[]string{"link", "set", port, "master", "br0", "up"},
	); err != nil {
		return err
	}
	in := h.enter(false)
	cmds := [][]string{{"link", "set", "lo", "up"}}
	for _, a := range addrs {
		cmds = append(cmds, []string{"-6", "addr", "add", fmt.Sprintf("%s/%d", a, lanBits), "dev", "eth0", "nodad"})
	}
	cmds = append(cmds, []string{"link", "set", "eth0", "up"}, []string{"-6", "route", "add", "default", "via", routerAddr.String(), "dev", "eth0"})
	return ips(in, cmds...)
}

// unplug takes holder h's link off the bridge, as a VM that lost its
// network: nothing reaches it or leaves it any more.
func unplug(port string) error { return ip(nil, "link", "set", port, "down") }
