package sandbox

import (
	"fmt"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// landlockABI returns the kernel's Landlock ABI version, or 0 without Landlock.
func landlockABI() int {
	v, err := llsys.LandlockGetABIVersion()
	if err != nil || v < 0 {
		return 0
	}
	return v
}

// landlockRuleset builds the Landlock ruleset for the program, as seen from
// inside the new root: everything readable and executable, writes only in /tmp
// and /out and to the harmless devices, no signals or abstract Unix sockets
// beyond the sandbox. It handles the access rights of ABI v7 and is downgraded
// to what the kernel offers. It returns -1 when there is nothing to enforce.
func landlockRuleset() (fd int, flags uint32, err error) {
	cfg := &landlock.Config{HandledAccessFS: landlock.V7.HandledAccessFS, Scoped: landlock.V7.Scoped}
	fd, flags, err = cfg.BestEffort().NewRulesetFD(
		landlock.RODirs("/"),
		landlock.RWDirs(TmpPath, OutputPath).WithRefer(),
		landlock.RWFiles("/dev/null", "/dev/zero", "/dev/full").WithIoctlDev(),
		landlock.ROFiles("/dev/random", "/dev/urandom").WithIoctlDev(),
	)
	if err != nil {
		return -1, 0, fmt.Errorf("landlock: building ruleset: %w", err)
	}
	return fd, flags, nil
}

// landlockRestrict enforces the ruleset on the calling thread only; the
// program forked from this thread inherits it.
func landlockRestrict(fd int, flags uint32) error {
	if err := llsys.LandlockRestrictSelf(fd, flags); err != nil {
		return fmt.Errorf("landlock: restricting: %w", err)
	}
	return nil
}
