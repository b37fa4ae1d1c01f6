package docker

// AgentConfig exposes agentConfig to the external tests, which parse its
// output with the agent's own parser.
var AgentConfig = agentConfig

// CheckStatic exposes checkStatic.
var CheckStatic = checkStatic

// DynamicPortWindow exposes dynamicPortWindow.
var DynamicPortWindow = dynamicPortWindow
