package client

import (
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// ChecksHealthProvider reports the service checks of an allocation for
// deployment health (health_check = "checks"): healthy is whether every
// check of the allocation passed its latest run, known is false while the
// allocation has no checks. The client's check runner implements it
// (Client.ChecksHealthy, services.go: a check not run yet counts as not
// passing, so known is true and healthy false until it passes) and is the
// default of Config.ChecksHealth. With known false, "checks" behaves as
// "task_states" (as Nomad does when an allocation has no checks).
type ChecksHealthProvider interface {
	ChecksHealthy(allocID string) (healthy bool, known bool)
}

// healthPollInterval is how often the health tracker looks at the task
// states.
const healthPollInterval = 100 * time.Millisecond

// trackDeploymentHealth starts the health tracker of an allocation that
// belongs to a deployment and has no verdict yet, unless its group's
// health_check is "manual" (a user sets it). It runs until the verdict is
// set, the allocation's tasks are all dead, or the client stops.
func (ar *allocRunner) trackDeploymentHealth(a *structs.Allocation) {
	if a.DeploymentID == "" || a.Job == nil || (a.DeploymentStatus != nil && a.DeploymentStatus.Healthy != nil) {
		return
	}
	tg := a.Job.LookupTaskGroup(a.TaskGroup)
	if tg == nil || tg.Update == nil || tg.Update.HealthCheck == structs.UpdateHealthCheckManual {
		return
	}
	ar.mu.Lock()
	if ar.healthDeployment == a.DeploymentID {
		ar.mu.Unlock()
		return
	}
	ar.healthDeployment = a.DeploymentID
	ar.deployHealth = nil
	ar.mu.Unlock()
	go ar.healthLoop(a.DeploymentID, tg.Update)
}

// healthLoop decides the allocation's health in deployment id under u:
// unhealthy as soon as a task has failed, or when HealthyDeadline passes
// first; healthy once every task has been running, without a restart in
// between, for MinHealthyTime (and, for "checks", the checks pass when
// the provider knows them).
func (ar *allocRunner) healthLoop(id string, u *structs.UpdateStrategy) {
	start := time.Now()
	deadline := start.Add(u.HealthyDeadline)
	var runningSince time.Time
	var restarts uint64
	t := time.NewTicker(healthPollInterval)
	defer t.Stop()
	for {
		select {
		case <-ar.c.ctx.Done():
			return
		case <-ar.done:
			// Every task is dead: one that failed makes the allocation
			// unhealthy even when it died between two looks.
			if ar.anyTaskFailed() {
				ar.setDeploymentHealth(id, false, time.Now())
			}
			return
		case <-t.C:
		}
		now := time.Now()
		ar.mu.Lock()
		if ar.healthDeployment != id {
			ar.mu.Unlock()
			return
		}
		all, failed := len(ar.taskStates) > 0, false
		var r uint64
		for _, ts := range ar.taskStates {
			r += ts.Restarts
			if ts.State == structs.TaskStateDead && ts.Failed {
				failed = true
			}
			if ts.State != structs.TaskStateRunning {
				all = false
			}
		}
		ar.mu.Unlock()
		if r != restarts {
			restarts, runningSince = r, time.Time{}
		}
		switch {
		case failed:
			ar.setDeploymentHealth(id, false, now)
			return
		case !all:
			runningSince = time.Time{}
		case runningSince.IsZero():
			runningSince = now
		}
		if all && now.Sub(runningSince) >= u.MinHealthyTime && ar.checksPass(u) {
			ar.setDeploymentHealth(id, true, now)
			return
		}
		if now.After(deadline) {
			ar.setDeploymentHealth(id, false, now)
			return
		}
	}
}

// anyTaskFailed reports whether a task ended failed.
func (ar *allocRunner) anyTaskFailed() bool {
	ar.mu.Lock()
	defer ar.mu.Unlock()
	for _, ts := range ar.taskStates {
		if ts.State == structs.TaskStateDead && ts.Failed {
			return true
		}
	}
	return false
}

// checksPass reports whether the service checks let the allocation be
// healthy: always, unless health_check is "checks" and a provider knows
// the allocation's checks and one fails.
func (ar *allocRunner) checksPass(u *structs.UpdateStrategy) bool {
	if u.HealthCheck != structs.UpdateHealthCheckChecks || ar.c.cfg.ChecksHealth == nil {
		return true
	}
	healthy, known := ar.c.cfg.ChecksHealth.ChecksHealthy(ar.alloc.ID)
	return !known || healthy
}

// setDeploymentHealth records the verdict and reports it with the next
// allocation update.
func (ar *allocRunner) setDeploymentHealth(id string, healthy bool, at time.Time) {
	ar.mu.Lock()
	if ar.healthDeployment != id {
		ar.mu.Unlock()
		return
	}
	h := healthy
	ar.deployHealth = &structs.AllocDeploymentStatus{Healthy: &h, Timestamp: at.UnixNano()}
	ar.mu.Unlock()
	ar.logger.Info("allocation deployment health set", "deployment_id", id, "healthy", healthy)
	ar.changed()
}
