package sandbox

import (
	"embed"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
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

// sources are the sandbox package's files. Their checksum (initIdentity) identifies the
// protocol between Run and the init and the init's behaviour: the parent
// sends its own, the init refuses a config from a parent built from other
// source, and the parent refuses an init that does not report its own.
//
//go:embed *.go
var sources embed.FS

// initIdentity identifies the package's non-test Go files: the total
// length and the CRC-32 (IEEE) of their names, lengths and contents (for
// each, in name order: "NAME LEN\n" and the content), as "LEN-CRC" in
// decimal and hex. It tells builds from different source apart (two of the
// same length match by accident with odds of 1 in 2^32); it is not a
// defence against a forged init, since whoever can replace the init program
// can replace feval. The CRC runs on the CPU's carry-less multiply in
// microseconds, where SHA-256 took a tenth of a millisecond of every start
// (and the Castagnoli CRC's table set-up as much).
var initIdentity = sync.OnceValue(func() string {
	var crc uint32
	var total int64
	add := func(b []byte) { crc = crc32.Update(crc, crc32.IEEETable, b) }
	// One buffer for every file: the init would otherwise copy the whole
	// source onto its fresh heap.
	buf := make([]byte, 16<<10)
	ents, _ := fs.ReadDir(sources, ".")
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		fi, err := e.Info()
		f, err2 := sources.Open(e.Name())
		if err != nil || err2 != nil {
			return "unreadable " + e.Name()
		}
		total += fi.Size()
		add([]byte(e.Name() + " " + strconv.FormatInt(fi.Size(), 10) + "\n"))
		for {
			n, err := f.Read(buf)
			add(buf[:n])
			if err != nil {
				break
			}
		}
		f.Close()
	}
	return fmt.Sprintf("%d-%08x", total, crc)
})

// staleInitError explains a handshake failure with the init at path.
func staleInitError(path string) error {
	if path == selfExe {
		return fmt.Errorf("%w (%s)", ErrStaleInit, path)
	}
	return fmt.Errorf("%w: rebuild %s together with this program (make build), or remove it to have this program act as its own init", ErrStaleInit, path)
}
