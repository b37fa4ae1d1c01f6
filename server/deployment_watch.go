package server

import (
	"context"

	"github.com/gpulayer/gpulayer/server/deploymentwatcher"
	"github.com/gpulayer/gpulayer/structs"
)

// deploymentWatchLoop runs the deployment watcher while this server leads
// (server/deploymentwatcher): its decisions are Raft entries.
func (s *Server) deploymentWatchLoop(ctx context.Context) {
	w, err := deploymentwatcher.New(deploymentwatcher.Config{
		Logger: s.logger,
		State:  s.fsm.State,
		Apply: func(t structs.MessageType, msg interface{}) (uint64, error) {
			_, index, err := s.raftApply(t, msg)
			return index, err
		},
		Enqueue: s.broker.Enqueue,
	})
	if err != nil {
		s.logger.Error("deployment watcher not started", "error", err)
		return
	}
	w.Run(ctx)
}
