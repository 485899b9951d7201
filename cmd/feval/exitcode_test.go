package main

import "testing"

// TestBatchExitCode: a batch exits with its gravest answer (rejected, then
// differs, then unchecked) when every item got one, and with the first
// failure to answer otherwise.
func TestBatchExitCode(t *testing.T) {
	for _, c := range []struct {
		codes []int
		want  int
	}{
		{nil, exitOK},
		{[]int{exitOK, exitOK}, exitOK},
		{[]int{exitOK, exitUnchecked}, exitUnchecked},
		{[]int{exitUnchecked, exitDiffers, exitUnchecked}, exitDiffers},
		{[]int{exitDiffers, exitRejected}, exitRejected},
		{[]int{exitUnchecked, exitVerify, exitUnavailable}, exitVerify},
	} {
		if got := batchExitCode(c.codes); got != c.want {
			t.Errorf("batchExitCode(%v) = %d, want %d", c.codes, got, c.want)
		}
	}
}
