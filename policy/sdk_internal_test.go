package policy

import (
	"os"
	"testing"
)

func TestWriteSDKFiles(t *testing.T) {
	dir := t.TempDir()
	if err := WriteSDK(dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"feval_policy.py", "feval_policy_run.py"} {
		if fi, err := os.Stat(dir + "/" + f); err != nil || fi.Size() == 0 {
			t.Fatalf("%s: %v", f, err)
		}
	}
}
