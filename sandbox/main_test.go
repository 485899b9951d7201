//go:build linux

package sandbox_test

import (
	"os"
	"testing"

	"github.com/feval/feval/sandbox"
)

func TestMain(m *testing.M) {
	sandbox.InitIfChild()
	code := m.Run()
	if goBuild.dir != "" {
		os.RemoveAll(goBuild.dir)
	}
	os.Exit(code)
}
