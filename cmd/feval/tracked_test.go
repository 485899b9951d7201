package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoBuildOutputsTracked fails when the repository tracks a compiled program
// or library (a built feval binary committed by mistake): build outputs belong
// in .gitignore, never in the tree.
func TestNoBuildOutputsTracked(t *testing.T) {
	root := gitRoot(t, ".")
	found, err := trackedBuildOutputs(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Errorf("%s is tracked but is a build output: git rm --cached it and add it to .gitignore", f)
	}
}

// TestTrackedBuildOutputsFindsBinaries proves the check above can fail: a
// repository with a committed ELF file and an ignored one.
func TestTrackedBuildOutputsFindsBinaries(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	write := func(name string, b []byte) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("cmd/tool/tool", append([]byte("\x7fELF\x02\x01\x01"), make([]byte, 64)...))
	write("README.md", []byte("# tool\n"))
	write("run.sh", []byte("#!/bin/sh\necho hi\n"))
	write("ignored/tool", []byte("\x7fELF\x02\x01\x01"))
	write(".gitignore", []byte("/ignored/\n"))
	git("add", ".")
	found, err := trackedBuildOutputs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || !strings.HasPrefix(found[0], "cmd/tool/tool ") {
		t.Fatalf("found %q, want only cmd/tool/tool", found)
	}
}

func TestBuildOutputKind(t *testing.T) {
	pe := make([]byte, 0x90)
	copy(pe, "MZ")
	binary.LittleEndian.PutUint32(pe[0x3c:], 0x80)
	copy(pe[0x80:], "PE\x00\x00")
	for _, tc := range []struct {
		name string
		head []byte
		want string
	}{
		{"elf", []byte("\x7fELF\x02\x01\x01\x00"), "ELF"},
		{"mach-o 64", []byte{0xcf, 0xfa, 0xed, 0xfe, 7, 0, 0, 1}, "Mach-O"},
		{"mach-o 32", []byte{0xce, 0xfa, 0xed, 0xfe}, "Mach-O"},
		{"mach-o big-endian", []byte{0xfe, 0xed, 0xfa, 0xcf}, "Mach-O"},
		{"mach-o universal", []byte{0xca, 0xfe, 0xba, 0xbe, 0, 0, 0, 2}, "Mach-O"},
		{"pe", pe, "PE"},
		{"wasm", []byte("\x00asm\x01\x00\x00\x00"), "WebAssembly"},
		{"ar archive", []byte("!<arch>\n__.PKGDEF"), "ar archive"},
		{"text", []byte("package main\n"), ""},
		{"script", []byte("#!/bin/sh\n"), ""},
		{"text starting MZ", []byte("MZ is a text file that starts like a PE header"), ""},
		{"empty", nil, ""},
		{"short", []byte{0x7f}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := buildOutputKind(tc.head); got != tc.want {
				t.Errorf("buildOutputKind = %q, want %q", got, tc.want)
			}
		})
	}
}

// gitRoot returns the top of the git checkout holding dir, skipping the test
// when there is none (a source archive, a module cache copy) or git is missing.
func gitRoot(t *testing.T, dir string) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	cmd := exec.Command("git", "rev-parse", "--show-toplevel")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Skip("not in a git checkout")
	}
	return strings.TrimSpace(string(out))
}

// trackedBuildOutputs lists the files git tracks under root whose first bytes
// are those of a compiled program or library, as "path (kind)".
func trackedBuildOutputs(root string) ([]string, error) {
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return nil, err
	}
	var found []string
	for _, name := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		if name == "" {
			continue
		}
		head, err := readHead(filepath.Join(root, name), 512)
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted in the work tree
		}
		if err != nil {
			return nil, err
		}
		if k := buildOutputKind(head); k != "" {
			found = append(found, name+" ("+k+")")
		}
	}
	return found, nil
}

func readHead(path string, n int) ([]byte, error) {
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, n)
	m, err := io.ReadFull(f, b)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b[:m], nil
}

// buildOutputKind names the executable or object format whose header starts
// head, or returns "" for anything else.
func buildOutputKind(head []byte) string {
	has := func(p string) bool { return bytes.HasPrefix(head, []byte(p)) }
	switch {
	case has("\x7fELF"):
		return "ELF"
	case has("\xfe\xed\xfa\xce"), has("\xfe\xed\xfa\xcf"), has("\xce\xfa\xed\xfe"), has("\xcf\xfa\xed\xfe"), has("\xca\xfe\xba\xbe"):
		return "Mach-O"
	case has("\x00asm"):
		return "WebAssembly"
	case has("!<arch>\n"):
		return "ar archive"
	case has("MZ") && len(head) >= 0x40:
		off := binary.LittleEndian.Uint32(head[0x3c:])
		if int(off)+4 <= len(head) && string(head[off:off+4]) == "PE\x00\x00" {
			return "PE"
		}
	}
	return ""
}
