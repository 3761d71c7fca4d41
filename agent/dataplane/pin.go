// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"podmin.dev/podmin/bpf"
)

// DefaultPinPath is where the dataplane pins its program, maps and links
// on a node (beneath the node root): a directory on the bpf filesystem
// systemd mounts at /sys/fs/bpf.
const DefaultPinPath = "/sys/fs/bpf/podmin"

// The pin directory holds one directory per generation (bpf.Generation)
// with the program and its maps, the TCX links (whatever program they
// run) in linksDir, and the generation being built under newPrefix until
// its first Apply commits it by a rename: a generation directory exists
// only once an agent of that generation programmed its maps. (The bpf
// filesystem refuses names with a dot.)
const (
	linksDir  = "links"
	newPrefix = "new-"
)

// pins is the dataplane's pin directory.
type pins struct {
	root string // Config.PinPath
	gen  string // this program's generation
	log  *slog.Logger
}

func (p *pins) genDir() string          { return filepath.Join(p.root, p.gen) }
func (p *pins) newDir() string          { return filepath.Join(p.root, newPrefix+p.gen) }
func (p *pins) linkPath(idx int) string { return filepath.Join(p.root, linksDir, strconv.Itoa(idx)) }

// checkBPFFS reports why path cannot hold pins: its parent must be on a
// bpf filesystem (the directory itself is created there, never on
// another file system).
func checkBPFFS(path string) error {
	var st unix.Statfs_t
	parent := filepath.Dir(path)
	if err := unix.Statfs(parent, &st); err != nil {
		return fmt.Errorf("%s: %w: mount the bpf filesystem there (mount -t bpf bpf %s)", parent, err, parent)
	}
	if st.Type != unix.BPF_FS_MAGIC {
		return fmt.Errorf("%s is not a bpf filesystem: mount one there (mount -t bpf bpf %s)", parent, parent)
	}
	if err := os.Mkdir(path, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if err := os.Mkdir(filepath.Join(path, linksDir), 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create %s: %w", filepath.Join(path, linksDir), err)
	}
	return nil
}

// open returns this generation's objects: the committed ones when their
// pins are complete and belong together (adopted), else freshly loaded
// ones pinned in the new directory, to be committed by the first Apply.
// Leftovers of a generation that was never committed, and a committed
// one that cannot be adopted, are removed first. When fresh objects
// cannot be pinned (or the directory cannot be read) it returns an
// errPinning, with the fresh objects when they are loaded: they work
// unpinned.
func (p *pins) open(o bpf.LoadOptions, load func() (*bpf.VipObjects, error)) (*bpf.VipObjects, bool, error) {
	entries, err := os.ReadDir(p.root)
	if err != nil {
		return nil, false, errPinning{fmt.Errorf("read %s: %w", p.root, err)}
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), newPrefix) {
			_ = os.RemoveAll(filepath.Join(p.root, e.Name()))
		}
	}
	if _, err := os.Stat(p.genDir()); err == nil {
		objs, err := bpf.LoadPinned(p.genDir(), o)
		if err == nil {
			return objs, true, nil
		}
		// Never adopt what cannot be proven to be this program's.
		p.log.Warn("the pinned dataplane of this generation is unusable: removing it and loading afresh", "path", p.genDir(), "err", err)
		_ = os.RemoveAll(p.genDir())
	}
	objs, err := load()
	if err != nil {
		return nil, false, err
	}
	if err := p.pinNew(objs); err != nil {
		return objs, false, errPinning{err}
	}
	return objs, false, nil
}

// errPinning wraps a failure to pin freshly loaded objects, which are
// still usable unpinned.
type errPinning struct{ error }

func (e errPinning) Unwrap() error { return e.error }

func (p *pins) pinNew(objs *bpf.VipObjects) error {
	if err := os.Mkdir(p.newDir(), 0o700); err != nil {
		return fmt.Errorf("create %s: %w", p.newDir(), err)
	}
	if err := bpf.Pin(objs, p.newDir()); err != nil {
		_ = os.RemoveAll(p.newDir())
		return err
	}
	return nil
}

// commit makes the new generation the one the next agent adopts.
func (p *pins) commit() error {
	if err := os.Rename(p.newDir(), p.genDir()); err != nil {
		return fmt.Errorf("commit the pinned dataplane: %w", err)
	}
	return nil
}

// oldGenerations lists the generation directories other than this one.
func (p *pins) oldGenerations() []string {
	entries, err := os.ReadDir(p.root)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if n := e.Name(); e.IsDir() && n != linksDir && n != p.gen && !strings.HasPrefix(n, newPrefix) {
			out = append(out, filepath.Join(p.root, n))
		}
	}
	return out
}

// links opens the pinned TCX links in the calling thread's network
// namespace, split into those running prog and the others (an earlier
// generation's). Pins that are not live TCX ingress links here (their
// interface is gone) are removed.
func (p *pins) links(prog *ebpf.Program) (ours, others map[int]attachment, err error) {
	ours, others = map[int]attachment{}, map[int]attachment{}
	dir := filepath.Join(p.root, linksDir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", dir, err)
	}
	id, err := programID(prog)
	if err != nil {
		return nil, nil, err
	}
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		l, err := link.LoadPinnedLink(path, nil)
		if err != nil {
			_ = os.Remove(path)
			continue
		}
		info, err := l.Info()
		var ifc *net.Interface
		if err == nil && info.TCX() != nil && ebpf.AttachType(info.TCX().AttachType) == ebpf.AttachTCXIngress {
			ifc, err = net.InterfaceByIndex(int(info.TCX().Ifindex))
		}
		if err != nil || ifc == nil {
			_ = l.Unpin()
			_ = l.Close()
			continue
		}
		a := attachment{ifc: Interface{Index: ifc.Index, Name: ifc.Name}, link: l}
		if info.Program == id {
			ours[ifc.Index] = a
		} else {
			others[ifc.Index] = a
		}
	}
	return ours, others, nil
}

func programID(prog *ebpf.Program) (ebpf.ProgramID, error) {
	info, err := prog.Info()
	if err != nil {
		return 0, fmt.Errorf("read the dataplane program's ID: %w", err)
	}
	id, ok := info.ID()
	if !ok {
		return 0, errors.New("read the dataplane program's ID: the kernel reports none")
	}
	return id, nil
}

// RemovePinned removes a pinned dataplane left at path (a node's
// DefaultPinPath beneath its root) by an agent that no longer runs one,
// and reports whether there was one: removing the pins releases the
// links, which detaches the program everywhere (the kernel finishes that
// in the background). A path that does not exist, or is not on a bpf
// filesystem, is left alone.
func RemovePinned(path string) (bool, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		return false, fmt.Errorf("remove the pinned dataplane: %s: %w", path, err)
	}
	if st.Type != unix.BPF_FS_MAGIC {
		return false, nil
	}
	if err := os.RemoveAll(path); err != nil {
		return true, fmt.Errorf("remove the pinned dataplane: %w: remove %s by hand", err, path)
	}
	return true, nil
}

// readState reconstructs the complete content of the maps of objs, what
// an earlier agent of this generation last programmed.
func readState(objs *bpf.VipObjects) (*state, error) {
	s := newState()
	if err := objs.Config.Lookup(uint32(0), &s.node); err != nil {
		return nil, fmt.Errorf("read the pinned dataplane's config: %w", err)
	}
	var va bpf.VipAddr
	var n uint32
	it := objs.Vips.Iterate()
	for it.Next(&va, &n) {
		s.vips[va] = n
	}
	var sk bpf.VipServiceKey
	var sv bpf.VipService
	its := objs.Services.Iterate()
	for its.Next(&sk, &sv) {
		s.services[sk] = sv
	}
	var bk bpf.VipBackendKey
	var bv bpf.VipBackend
	itb := objs.Backends.Iterate()
	for itb.Next(&bk, &bv) {
		s.backends[bk] = bv
	}
	if err := errors.Join(it.Err(), its.Err(), itb.Err()); err != nil {
		return nil, fmt.Errorf("read the pinned dataplane's maps: %w", err)
	}
	return s, nil
}
