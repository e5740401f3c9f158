//go:build tools

// Package tools pins the commands this module builds.
package tools

import (
	_ "github.com/NVIDIA/KAI-scheduler/cmd/admission"
	_ "github.com/NVIDIA/KAI-scheduler/cmd/binder"
	_ "github.com/NVIDIA/KAI-scheduler/cmd/nodescaleadjuster"
	_ "github.com/NVIDIA/KAI-scheduler/cmd/podgrouper"
	_ "github.com/NVIDIA/KAI-scheduler/cmd/scheduler"
)
