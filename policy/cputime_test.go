package policy

import (
	"syscall"
	"testing"
)

// CPUTimer reports a benchmark's process CPU time per operation
// ("cpu-ns/op") beside its wall time: on a shared, loaded machine the wall
// time includes waiting for a core.
func CPUTimer(b *testing.B) func() {
	start := cpuNanos()
	return func() {
		b.ReportMetric(float64(cpuNanos()-start)/float64(b.N), "cpu-ns/op")
	}
}

func cpuNanos() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}
