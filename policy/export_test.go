package policy

// Exported for the external tests.
var CPUTimerForTest = CPUTimer
