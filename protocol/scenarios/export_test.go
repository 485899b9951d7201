package scenarios

import "context"

// RunVerifier runs the verifier of the task in taskDir on scenario sc's hidden
// tests (taskDir/scenarios/NAME/hidden) and the workspace ws.
func RunVerifier(ctx context.Context, spec Spec, taskDir string, sc ScenarioSpec, ws string) ([]byte, error) {
	return verify(ctx, spec, taskDir, sc, ws)
}
