package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// systemDirs are bound read-only from the host so that /bin/sh,
// /usr/bin/python3 and their libraries work. A host symlink (merged /usr) is
// recreated as the same symlink.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32"}

// etcBinds are the only host files under /etc the program sees.
var etcBinds = []string{"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives"}

// etcFiles are written fresh, so that nothing about the host's users or names
// shows through.
var etcFiles = []struct{ name, content string }{
	{"passwd", "root:x:0:0:root:/nonexistent:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"},
	{"group", "root:x:0:\nnogroup:x:65534:\n"},
	{"hosts", "127.0.0.1\tlocalhost " + Hostname + "\n::1\tlocalhost ip6-localhost ip6-loopback\n"},
	{"nsswitch.conf", "passwd: files\ngroup: files\nhosts: files dns\n"},
}

// devNodes are bound read-only from the host /dev.
var devNodes = []string{"null", "zero", "full", "random", "urandom"}

// procReadOnly are parts of the new /proc made read-only.
var procReadOnly = []string{"sys", "sysrq-trigger", "irq", "bus"}

type stageError struct {
	stage string
	err   error
}

func (e *stageError) Error() string { return e.stage + ": " + e.err.Error() }

func stage(name string, err error) error {
	if err == nil {
		return nil
	}
	return &stageError{stage: name, err: err}
}

// buildRoot assembles the sandbox's root file system in cfg.RootDir and
// pivots into it. It runs in the init, inside fresh user and mount
// namespaces; nothing it does is visible on the host.
func buildRoot(cfg *initConfig) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return stage("make mounts private", err)
	}
	root := cfg.RootDir
	if err := unix.Mount("tmpfs", root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=1m,nr_inodes=4096"); err != nil {
		return stage("mount root tmpfs", err)
	}
	at := func(p string) string { return filepath.Join(root, p) }

	for _, d := range systemDirs {
		fi, err := os.Lstat(d)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return stage("stat "+d, err)
		}
		if err := mirror(d, at(d), fi); err != nil {
			return err
		}
	}

	if err := os.Mkdir(at("/etc"), 0o755); err != nil {
		return stage("mkdir /etc", err)
	}
	for _, f := range etcFiles {
		if err := os.WriteFile(at("/etc/"+f.name), []byte(f.content), 0o644); err != nil {
			return stage("write /etc/"+f.name, err)
		}
	}
	for _, p := range etcBinds {
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return stage("stat "+p, err)
		}
		if err := mirror(p, at(p), fi); err != nil {
			return err
		}
	}

	if err := buildDev(at("/dev")); err != nil {
		return err
	}

	if err := os.Mkdir(at("/proc"), 0o555); err != nil {
		return stage("mkdir /proc", err)
	}
	if err := unix.Mount("proc", at("/proc"), "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return stage("mount /proc", err)
	}
	for _, p := range procReadOnly {
		full := at("/proc/" + p)
		if _, err := os.Lstat(full); err != nil {
			continue
		}
		if err := bindMount(full, full, unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC); err != nil {
			return err
		}
	}

	if err := os.Mkdir(at(TmpPath), 0o755); err != nil {
		return stage("mkdir /tmp", err)
	}
	tmpInodes := max(cfg.TmpBytes/1024, 1024)
	if err := unix.Mount("tmpfs", at(TmpPath), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV,
		fmt.Sprintf("mode=1777,size=%d,nr_inodes=%d", cfg.TmpBytes, tmpInodes)); err != nil {
		return stage("mount /tmp", err)
	}
	if err := os.Mkdir(at(OutputPath), 0o755); err != nil {
		return stage("mkdir /out", err)
	}
	if err := unix.Mount("tmpfs", at(OutputPath), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV,
		fmt.Sprintf("mode=0755,uid=%d,gid=%d,size=%d,nr_inodes=%d", UID, GID, cfg.OutputBytes, cfg.OutputFiles+1)); err != nil {
		return stage("mount /out", err)
	}

	if err := os.Mkdir(at(InputRoot), 0o755); err != nil {
		return stage("mkdir /in", err)
	}
	if len(cfg.Inputs) > 0 {
		if err := mountInputs(root, cfg.Inputs); err != nil {
			return err
		}
	}

	if err := os.Mkdir(at("/run"), 0o755); err != nil {
		return stage("mkdir /run", err)
	}
	if cfg.Socket != "" {
		dst := at(SocketPath)
		if err := mountPoint(dst, false); err != nil {
			return stage("create "+SocketPath, err)
		}
		// Connecting to a socket is allowed on a read-only mount.
		if err := bindMount(cfg.Socket, dst, unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC); err != nil {
			return err
		}
	}

	if err := unix.Mount("", root, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return stage("remount root read-only", err)
	}
	if err := unix.Chdir(root); err != nil {
		return stage("chdir to new root", err)
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return stage("pivot_root", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return stage("detach old root", err)
	}
	return stage("chdir /", unix.Chdir("/"))
}

// inputStaging is a directory of the new root used while the inputs are
// mounted, and removed again: an empty overlay layer, and the place where the
// overlay of a file input's directory is mounted before the file is bound.
const inputStaging = "/.feval-staging"

// mountInputs mounts each input read-only, nosuid and nodev at its target so
// that its host path does not show in the sandbox's mount table. A bind
// mount shows the path of its source within the source's file system there
// (user names, home directories, the store's layout). An overlay whose only
// layers are the input and an empty directory, both named by descriptor
// (/proc/self/fd/N), shows "/" and descriptor numbers instead. A file input is
// bound from an overlay of its directory: its own name shows, nothing above
// it.
func mountInputs(root string, inputs []initMount) error {
	staging := filepath.Join(root, inputStaging)
	empty := filepath.Join(staging, "empty")
	stage2 := filepath.Join(staging, "dir")
	for _, d := range []string{staging, empty, stage2} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return stage("mkdir "+d, err)
		}
	}
	// The empty layer is a small file system of its own, detached from the
	// tree once the inputs are mounted: each overlay keeps its own reference
	// to it. Removing an empty directory instead would leave the overlays
	// merging a deleted directory, whose listing is empty.
	if err := unix.Mount("tmpfs", empty, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k,nr_inodes=1,mode=0755"); err != nil {
		return stage("mount empty layer", err)
	}
	emptyFD, err := unix.Open(empty, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return stage("open empty layer", err)
	}
	defer unix.Close(emptyFD)
	const flags = unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV
	overlay := func(src, dst string) error {
		fd, err := unix.Open(src, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return stage("open input "+src, err)
		}
		defer unix.Close(fd)
		opts := fmt.Sprintf("lowerdir=/proc/self/fd/%d:/proc/self/fd/%d", fd, emptyFD)
		return stage("mount overlay of "+src, unix.Mount("overlay", dst, "overlay", flags, opts))
	}
	for _, m := range inputs {
		src, err := filepath.EvalSymlinks(m.Source)
		if err != nil {
			return stage("resolve input "+m.Source, err)
		}
		dst := filepath.Join(root, m.Target)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return stage("mkdir "+filepath.Dir(m.Target), err)
		}
		if err := mountPoint(dst, m.Dir); err != nil {
			return stage("create "+m.Target, err)
		}
		if m.Dir {
			if err := overlay(src, dst); err != nil {
				return err
			}
			continue
		}
		if err := overlay(filepath.Dir(src), stage2); err != nil {
			return err
		}
		err = bindMount(filepath.Join(stage2, filepath.Base(src)), dst, flags)
		if uerr := unix.Unmount(stage2, unix.MNT_DETACH); err == nil && uerr != nil {
			err = stage("unmount staging overlay", uerr)
		}
		if err != nil {
			return err
		}
	}
	if err := unix.Unmount(empty, unix.MNT_DETACH); err != nil {
		return stage("detach empty layer", err)
	}
	for _, d := range []string{stage2, empty, staging} {
		if err := os.Remove(d); err != nil {
			return stage("remove "+d, err)
		}
	}
	return nil
}

// mirror reproduces host path src at dst: a symlink as the same symlink,
// anything else as a read-only bind mount.
func mirror(src, dst string, fi fs.FileInfo) error {
	if fi.Mode()&fs.ModeSymlink != 0 {
		t, err := os.Readlink(src)
		if err != nil {
			return stage("readlink "+src, err)
		}
		return stage("symlink "+src, os.Symlink(t, dst))
	}
	if err := mountPoint(dst, fi.IsDir()); err != nil {
		return stage("create mount point for "+src, err)
	}
	return bindMount(src, dst, unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV)
}

func mountPoint(p string, dir bool) error {
	if dir {
		return os.Mkdir(p, 0o755)
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// bindMount binds src on dst (not recursively) and remounts the bind with
// flags, keeping the flags the kernel locks from the host mount.
func bindMount(src, dst string, flags uintptr) error {
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return stage("bind "+src, err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dst, &st); err != nil {
		return stage("statfs "+dst, err)
	}
	keep := uintptr(st.Flags) & (unix.ST_RDONLY | unix.ST_NOSUID | unix.ST_NODEV | unix.ST_NOEXEC |
		unix.ST_NOATIME | unix.ST_NODIRATIME | unix.ST_RELATIME)
	if keep&(unix.ST_NOATIME|unix.ST_RELATIME) == 0 {
		keep |= unix.MS_STRICTATIME
	}
	if err := unix.Mount("", dst, "", unix.MS_BIND|unix.MS_REMOUNT|flags|keep, ""); err != nil {
		return stage("remount "+src, err)
	}
	return nil
}

func buildDev(dev string) error {
	if err := os.Mkdir(dev, 0o755); err != nil {
		return stage("mkdir /dev", err)
	}
	if err := unix.Mount("tmpfs", dev, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=64k,nr_inodes=64"); err != nil {
		return stage("mount /dev", err)
	}
	for _, n := range devNodes {
		p := filepath.Join(dev, n)
		if err := mountPoint(p, false); err != nil {
			return stage("create /dev/"+n, err)
		}
		// Read-only: the devices still read and write, but the host's nodes
		// (their times, their modes) cannot be changed through them.
		if err := bindMount("/dev/"+n, p, unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NOEXEC); err != nil {
			return err
		}
	}
	links := []struct{ name, target string }{
		{"fd", "/proc/self/fd"},
		{"stdin", "/proc/self/fd/0"},
		{"stdout", "/proc/self/fd/1"},
		{"stderr", "/proc/self/fd/2"},
		{"shm", TmpPath},
	}
	for _, l := range links {
		if err := os.Symlink(l.target, filepath.Join(dev, l.name)); err != nil {
			return stage("symlink /dev/"+l.name, err)
		}
	}
	return stage("remount /dev read-only",
		unix.Mount("", dev, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NOEXEC, ""))
}

// loopbackUp brings up lo, the only interface of the new network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return stage("loopback socket", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return stage("loopback", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return stage("loopback flags", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return stage("loopback up", unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr))
}
