package sandbox

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// selfExe is the init used when no init program is found: the calling binary
// itself, which must call InitIfChild first thing in main.
const selfExe = "/proc/self/exe"

// initOverride, when not nil, replaces the lookup of initPath (tests only).
var initOverride *string

// initPath returns the init that Run starts: $FEVAL_SANDBOX_INIT if set (it
// must be an executable regular file), else InitProgram beside the calling
// executable if it is one, else the calling binary itself (selfExe).
func initPath() (string, error) {
	if initOverride != nil {
		return *initOverride, nil
	}
	if p, ok := os.LookupEnv(InitEnv); ok && p != "" {
		if !isExecutable(p) {
			return "", fmt.Errorf("%s=%s is not an executable file: build it (make build) or unset %s", InitEnv, p, InitEnv)
		}
		return p, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return selfExe, nil
	}
	p := filepath.Join(filepath.Dir(exe), InitProgram)
	if isExecutable(p) {
		return p, nil
	}
	return selfExe, nil
}

// sources are the sandbox package's files. Their digest identifies the
// protocol between Run and the init and the init's behaviour: the parent
// sends its own, the init refuses a config from a parent built from other
// source, and the parent refuses an init that does not report its own.
//
//go:embed *.go
var sources embed.FS

// initIdentity is the hex SHA-256 of the package's non-test Go files (name,
// length and content of each, in name order).
var initIdentity = sync.OnceValue(func() string {
	h := sha256.New()
	ents, _ := fs.ReadDir(sources, ".")
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		b, _ := sources.ReadFile(e.Name())
		fmt.Fprintf(h, "%s %d\n", e.Name(), len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
})

// staleInitError explains a handshake failure with the init at path.
func staleInitError(path string) error {
	if path == selfExe {
		return fmt.Errorf("%w (%s)", ErrStaleInit, path)
	}
	return fmt.Errorf("%w: rebuild %s together with this program (make build), or remove it to have this program act as its own init", ErrStaleInit, path)
}
