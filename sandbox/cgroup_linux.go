package sandbox

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Controllers the sandbox uses. "cpu" means CPU accounting: cpuacct on cgroup
// v1, cpu on cgroup v2. "cpu-quota" is CPU bandwidth control: cpu on either
// version (on v2 the same controller as accounting).
const (
	ctlMemory   = "memory"
	ctlPids     = "pids"
	ctlCPU      = "cpu"
	ctlCPUQuota = "cpu-quota"
)

// controllers lists every controller the sandbox uses, in a fixed order.
var controllers = []string{ctlMemory, ctlPids, ctlCPU, ctlCPUQuota}

// cpuPeriodMicros is the CPU bandwidth period of a run's cgroup.
const cpuPeriodMicros = 100_000

// cpuQuotaMicros is the CPU time a run may use per period: every core but
// one, so that the supervisor (Run's timers and the init) always has a
// core's share however the program loads the machine; half a core on a
// single-core host.
func cpuQuotaMicros(cores int) int64 {
	if cores < 2 {
		return cpuPeriodMicros / 2
	}
	return int64(cores-1) * cpuPeriodMicros
}

// cgroupHome is the caller's own cgroup directory for one controller, under
// which a run's cgroup is created.
type cgroupHome struct {
	dir string
	v2  bool
	// procs is where the caller's own process lives, and where Run moves
	// the init back to: dir itself, or on cgroup v2 the supervisor leaf
	// (see enableV2).
	procs string
}

// cgroupLayout says where each controller can be used, and why not where it
// cannot.
type cgroupLayout struct {
	homes    map[string]cgroupHome
	problems map[string]string
}

// version returns "v1", "v2" or "" for a controller.
func (l cgroupLayout) version(ctl string) string {
	h, ok := l.homes[ctl]
	switch {
	case !ok:
		return ""
	case h.v2:
		return "v2"
	default:
		return "v1"
	}
}

type mountEntry struct {
	root, point, fstype string
	superOpts           []string
}

func readMountinfo() ([]mountEntry, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []mountEntry
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		f := strings.Fields(pre)
		g := strings.Fields(post)
		if len(f) < 5 || len(g) < 3 {
			continue
		}
		out = append(out, mountEntry{
			root:      unescapeMount(f[3]),
			point:     unescapeMount(f[4]),
			fstype:    g[0],
			superOpts: strings.Split(g[2], ","),
		})
	}
	return out, sc.Err()
}

// unescapeMount undoes the octal escapes of /proc/self/mountinfo.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// discoverCgroups finds, for each controller, the caller's own cgroup
// directory. With probe set it also checks that a child cgroup can be created
// there, by creating and removing one per hierarchy.
func discoverCgroups(probe bool) cgroupLayout {
	l := cgroupLayout{homes: map[string]cgroupHome{}, problems: map[string]string{}}
	fail := func(why string) cgroupLayout {
		for _, c := range controllers {
			l.problems[c] = why
		}
		return l
	}
	mounts, err := readMountinfo()
	if err != nil {
		return fail("reading mountinfo: " + err.Error())
	}
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return fail("reading /proc/self/cgroup: " + err.Error())
	}
	v1Paths := map[string]string{} // controller -> path
	v2Path, hasV2 := "", false
	for _, line := range strings.Split(strings.TrimSpace(string(own)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			v2Path, hasV2 = parts[2], true
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			v1Paths[c] = parts[2]
		}
	}
	resolve := func(m mountEntry, p string) (string, bool) {
		if m.root != "/" {
			if p != m.root && !strings.HasPrefix(p, m.root+"/") {
				return "", false
			}
			p = strings.TrimPrefix(p, m.root)
		}
		return filepath.Join(m.point, p), true
	}
	want := map[string][]string{ // controller -> names on v1, v2
		ctlMemory:   {"memory", "memory"},
		ctlPids:     {"pids", "pids"},
		ctlCPU:      {"cpuacct", "cpu"},
		ctlCPUQuota: {"cpu", "cpu"},
	}
	probed := map[string]error{}
	tryDir := func(dir string) error {
		if !probe {
			return nil
		}
		if err, ok := probed[dir]; ok {
			return err
		}
		d, err := os.MkdirTemp(dir, "feval-sandbox-probe-")
		if err == nil {
			err = removeCgroupDir(d)
		}
		probed[dir] = err
		return err
	}
	for _, ctl := range controllers {
		// cgroup v2 first, when the controller is delegated to our children.
		if hasV2 {
			for _, m := range mounts {
				if m.fstype != "cgroup2" {
					continue
				}
				dir, ok := resolve(m, v2Path)
				if !ok {
					continue
				}
				dir, procs := v2Home(dir)
				sub, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
				if err != nil {
					continue
				}
				if !containsWord(string(sub), want[ctl][1]) {
					avail, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
					if err != nil || !containsWord(string(avail), want[ctl][1]) {
						continue
					}
					if procs, err = enableV2(dir); err != nil {
						l.problems[ctl] = fmt.Sprintf("cgroup v2 %s: %v", dir, err)
						continue
					}
				}
				if err := tryDir(dir); err != nil {
					l.problems[ctl] = fmt.Sprintf("cgroup v2 %s: %v", dir, err)
					continue
				}
				l.homes[ctl] = cgroupHome{dir: dir, v2: true, procs: procs}
				break
			}
			if _, ok := l.homes[ctl]; ok {
				delete(l.problems, ctl)
				continue
			}
		}
		name := want[ctl][0]
		p, ok := v1Paths[name]
		if !ok {
			if _, set := l.problems[ctl]; !set {
				l.problems[ctl] = "no cgroup v1 hierarchy and no delegated cgroup v2 controller for " + want[ctl][1]
			}
			continue
		}
		for _, m := range mounts {
			if m.fstype != "cgroup" || !contains(m.superOpts, name) {
				continue
			}
			dir, ok := resolve(m, p)
			if !ok {
				continue
			}
			if err := tryDir(dir); err != nil {
				l.problems[ctl] = fmt.Sprintf("cgroup v1 %s: %v", dir, err)
				continue
			}
			l.homes[ctl] = cgroupHome{dir: dir, procs: dir}
			delete(l.problems, ctl)
			break
		}
		if _, ok := l.homes[ctl]; !ok {
			if _, set := l.problems[ctl]; !set {
				l.problems[ctl] = "cgroup v1 " + name + " hierarchy not mounted"
			}
		}
	}
	return l
}

// layoutCache holds the layout Run last discovered, keyed by the caller's
// cgroup membership (/proc/self/cgroup): reading the mount table costs more
// than the rest of a run's cgroup set-up.
var layoutCache struct {
	sync.Mutex
	own    string
	layout cgroupLayout
}

// runLayout returns discoverCgroups(false), from layoutCache while the
// caller's membership is unchanged; fresh says it was discovered now. A
// cached layout can be stale only if the hierarchies were remounted or the
// caller's cgroup removed: Run then retries with a fresh one.
func runLayout() (l cgroupLayout, fresh bool) {
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return discoverCgroups(false), true
	}
	layoutCache.Lock()
	defer layoutCache.Unlock()
	if layoutCache.own != "" && layoutCache.own == string(own) {
		return layoutCache.layout, false
	}
	l = discoverCgroups(false)
	// Discovery may move the caller (enableV2): key by where it is now.
	if after, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		layoutCache.own, layoutCache.layout = string(after), l
	}
	return l, true
}

// forgetLayout empties layoutCache.
func forgetLayout() {
	layoutCache.Lock()
	defer layoutCache.Unlock()
	layoutCache.own = ""
}

// v2Controllers are the cgroup v2 controllers the sandbox uses.
var v2Controllers = []string{"memory", "pids", "cpu"}

// v2SupervisorLeaf is the leaf of a cgroup v2 home that feval processes
// move into so that the home can enable controllers for its children (see
// enableV2). Every feval process of the home shares it.
const v2SupervisorLeaf = "feval-supervisor"

// enableV2Mu serializes enableV2 within the process.
var enableV2Mu sync.Mutex

// v2Home maps the caller's own cgroup v2 directory to the home its runs'
// cgroups are created in, and where its process lives: the same directory,
// unless the process lives in the home's supervisor leaf.
func v2Home(dir string) (home, procs string) {
	if filepath.Base(dir) == v2SupervisorLeaf {
		return filepath.Dir(dir), dir
	}
	return dir, dir
}

// enableV2 enables, in dir's cgroup.subtree_control, the v2Controllers that
// dir offers, and returns where the caller's process lives afterwards.
// cgroup v2 lets a cgroup other than the root enable controllers for its
// children only while it holds no process. So when dir holds the caller's
// process, and nothing else, enableV2 moves the process into the leaf
// dir/feval-supervisor first (every thread moves; the leaf stays for the
// next feval process of the home).
// It changes nothing and fails when dir holds other processes: feval must
// then run in a delegated cgroup of its own (systemd's Delegate=yes, say).
func enableV2(dir string) (procs string, err error) {
	enableV2Mu.Lock()
	defer enableV2Mu.Unlock()
	avail, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return "", err
	}
	var add []string
	for _, c := range v2Controllers {
		if containsWord(string(avail), c) {
			add = append(add, "+"+c)
		}
	}
	enable := func() error { return writeCgroupFile(dir, "cgroup.subtree_control", strings.Join(add, " ")) }
	err = enable()
	if err == nil || !errors.Is(err, syscall.EBUSY) {
		return dir, err
	}
	pid := strconv.Itoa(os.Getpid())
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return "", err
	}
	for _, p := range strings.Fields(string(b)) {
		if p != pid {
			return "", fmt.Errorf("controllers %s are available but not enabled for children, and the cgroup holds processes other than this one (%s): run feval in a delegated cgroup of its own", strings.Join(add, " "), p)
		}
	}
	leaf := filepath.Join(dir, v2SupervisorLeaf)
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	if err := writeCgroupFile(leaf, "cgroup.procs", pid); err != nil {
		return "", err
	}
	if err := enable(); err != nil {
		_ = writeCgroupFile(dir, "cgroup.procs", pid)
		return "", err
	}
	return leaf, nil
}

func containsWord(s, w string) bool { return contains(strings.Fields(s), w) }

func contains(list []string, w string) bool {
	for _, v := range list {
		if v == w {
			return true
		}
	}
	return false
}

// runDirPrefix starts the names of a run's cgroups and root mount point:
// "feval-sandbox-<pid>-", so that what a process left behind can be told from
// the runs of other processes on the host.
func runDirPrefix() string { return "feval-sandbox-" + strconv.Itoa(os.Getpid()) + "-" }

// runCgroup is the cgroup (one directory per hierarchy) of one run.
type runCgroup struct {
	dirs  map[string]string // controller -> directory; absent if unused
	homes map[string]string // controller -> where the caller's own process lives
	v2    map[string]bool
	made  []string // directories to remove, deepest last
}

// newRunCgroup creates the run's cgroups for every controller the layout
// offers, sets the memory limit, and fails with an *UnavailableError if a
// limit that lim requires has no controller.
func newRunCgroup(layout cgroupLayout, lim Limits) (*runCgroup, error) {
	need := []struct {
		ctl, guarantee, mechanism string
		required                  bool
	}{
		{ctlMemory, GuaranteeMemoryLimit, "writable memory cgroup", lim.MemoryBytes != NoLimit},
		{ctlPids, GuaranteeProcessLimit, "writable pids cgroup", lim.Processes != NoLimit},
		{ctlCPU, GuaranteeCPULimit, "writable CPU accounting cgroup", lim.CPUMillis != NoLimit},
		{ctlCPUQuota, GuaranteeCPULimit, "writable CPU bandwidth cgroup", lim.CPUMillis != NoLimit},
	}
	for _, n := range need {
		if _, ok := layout.homes[n.ctl]; !ok && n.required {
			return nil, &UnavailableError{Guarantee: n.guarantee, Mechanism: n.mechanism, Err: errors.New(layout.problems[n.ctl])}
		}
	}
	cg := &runCgroup{dirs: map[string]string{}, homes: map[string]string{}, v2: map[string]bool{}}
	byHome := map[string]string{}
	for _, n := range need {
		h, ok := layout.homes[n.ctl]
		if !ok {
			continue
		}
		dir, ok := byHome[h.dir]
		if !ok {
			d, err := os.MkdirTemp(h.dir, runDirPrefix())
			if err != nil {
				cg.remove()
				if n.required {
					return nil, &UnavailableError{Guarantee: n.guarantee, Mechanism: n.mechanism, Err: err}
				}
				continue
			}
			dir = d
			byHome[h.dir] = d
			cg.made = append(cg.made, d)
		}
		cg.dirs[n.ctl] = dir
		cg.homes[n.ctl] = h.procs
		cg.v2[n.ctl] = h.v2
	}
	if lim.Processes != NoLimit {
		if err := cg.setPids(lim.Processes + initTaskAllowance); err != nil {
			cg.remove()
			return nil, &SetupError{Stage: "set process limit", Err: err}
		}
	}
	if dir, ok := cg.dirs[ctlCPUQuota]; ok {
		quota := strconv.FormatInt(cpuQuotaMicros(runtime.NumCPU()), 10)
		period := strconv.Itoa(cpuPeriodMicros)
		var err error
		if cg.v2[ctlCPUQuota] {
			err = writeCgroupFile(dir, "cpu.max", quota+" "+period)
		} else {
			err = writeCgroupFile(dir, "cpu.cfs_period_us", period)
			if err == nil {
				err = writeCgroupFile(dir, "cpu.cfs_quota_us", quota)
			}
		}
		if err != nil {
			cg.remove()
			return nil, &SetupError{Stage: "set CPU quota", Err: err}
		}
	}
	if dir, ok := cg.dirs[ctlMemory]; ok && lim.MemoryBytes != NoLimit {
		v := strconv.FormatInt(lim.MemoryBytes, 10)
		var err error
		if cg.v2[ctlMemory] {
			err = writeCgroupFile(dir, "memory.max", v)
			if err == nil {
				err = writeOptional(dir, "memory.swap.max", "0")
			}
		} else {
			err = writeCgroupFile(dir, "memory.limit_in_bytes", v)
			if err == nil {
				err = writeOptional(dir, "memory.memsw.limit_in_bytes", v)
			}
			// v1 keeps TCP buffers outside memory.limit_in_bytes. The
			// filter refuses TCP sockets; this bounds them should one
			// ever be reachable.
			if err == nil {
				err = writeOptional(dir, "memory.kmem.tcp.limit_in_bytes", v)
			}
		}
		if err != nil {
			cg.remove()
			return nil, &SetupError{Stage: "set memory limit", Err: err}
		}
	}
	return cg, nil
}

// mechanisms names the cgroup mechanisms in force.
func (cg *runCgroup) mechanisms() []string {
	var m []string
	for ctl, v2 := range cg.v2 {
		ver := "v1"
		if v2 {
			ver = "v2"
		}
		m = append(m, "cgroup-"+ver+"-"+ctl)
	}
	return m
}

// addProcess moves pid into every cgroup of the run.
func (cg *runCgroup) addProcess(pid int) error { return moveTo(cg.dirs, pid) }

// moveOut moves pid back to the caller's own cgroups, so that the run's
// cgroups hold only the program's processes: its limits and counters are
// then the program's alone, and the out-of-memory killer cannot pick pid.
func (cg *runCgroup) moveOut(pid int) error { return moveTo(cg.homes, pid) }

// moveTo writes pid into cgroup.procs of each distinct directory of dirs (v1
// controllers may share one directory).
func moveTo(dirs map[string]string, pid int) error {
	done := map[string]bool{}
	for _, dir := range dirs {
		if done[dir] {
			continue
		}
		done[dir] = true
		if err := writeCgroupFile(dir, "cgroup.procs", strconv.Itoa(pid)); err != nil {
			return err
		}
	}
	return nil
}

// setPids sets the task limit; NoLimit writes "max".
func (cg *runCgroup) setPids(n int64) error {
	dir, ok := cg.dirs[ctlPids]
	if !ok {
		return nil
	}
	v := "max"
	if n != NoLimit {
		v = strconv.FormatInt(n, 10)
	}
	return writeCgroupFile(dir, "pids.max", v)
}

// cgroupCounters are what a run's cgroups report at its end.
type cgroupCounters struct {
	oomKills, pidsEvents, peakMemory int64
}

// counters reads the counters; peakMemory is -1 if unknown.
func (cg *runCgroup) counters() *cgroupCounters {
	return &cgroupCounters{oomKills: cg.oomKills(), pidsEvents: cg.pidsEvents(), peakMemory: cg.peakMemory()}
}

// pidsEvents returns how many forks the pids limit refused.
func (cg *runCgroup) pidsEvents() int64 {
	dir, ok := cg.dirs[ctlPids]
	if !ok {
		return 0
	}
	return readKeyed(dir, "pids.events", "max")
}

// oomKills returns how many processes the memory limit killed.
func (cg *runCgroup) oomKills() int64 {
	dir, ok := cg.dirs[ctlMemory]
	if !ok {
		return 0
	}
	if cg.v2[ctlMemory] {
		return readKeyed(dir, "memory.events", "oom_kill")
	}
	return readKeyed(dir, "memory.oom_control", "oom_kill")
}

// peakMemory returns the peak memory charged, or -1 if unknown.
func (cg *runCgroup) peakMemory() int64 {
	dir, ok := cg.dirs[ctlMemory]
	if !ok {
		return -1
	}
	name := "memory.max_usage_in_bytes"
	if cg.v2[ctlMemory] {
		name = "memory.peak"
	}
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return -1
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return -1
	}
	return v
}

// cpuNanos returns the CPU time charged, or -1 if unknown.
func (cg *runCgroup) cpuNanos() int64 {
	dir, ok := cg.dirs[ctlCPU]
	if !ok {
		return -1
	}
	if cg.v2[ctlCPU] {
		v := readKeyed(dir, "cpu.stat", "usage_usec")
		return v * 1000
	}
	b, err := os.ReadFile(filepath.Join(dir, "cpuacct.usage"))
	if err != nil {
		return -1
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return -1
	}
	return v
}

// remove deletes the run's cgroups. It retries briefly: a cgroup stays busy
// for a moment after its last task was reaped.
func (cg *runCgroup) remove() error {
	var errs []error
	for i := len(cg.made) - 1; i >= 0; i-- {
		if err := removeCgroupDir(cg.made[i]); err != nil {
			errs = append(errs, err)
		}
	}
	cg.made = nil
	return errors.Join(errs...)
}

func removeCgroupDir(dir string) error {
	var err error
	for i := 0; i < 200; i++ {
		err = syscall.Rmdir(dir)
		if err == nil || errors.Is(err, syscall.ENOENT) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	return fmt.Errorf("removing cgroup %s: %w", dir, err)
}

func writeCgroupFile(dir, name, v string) error {
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(v)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s to %s: %w", v, filepath.Join(dir, name), err)
	}
	return nil
}

// writeOptional writes a file that not every kernel configuration has.
func writeOptional(dir, name, v string) error {
	if _, err := os.Stat(filepath.Join(dir, name)); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return writeCgroupFile(dir, name, v)
}

// readKeyed returns the value of key in a "key value" cgroup file, or 0.
func readKeyed(dir, name, key string) int64 {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if ok && k == key {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return 0
}
