package server

import "fmt"

// StateHash returns the hex SHA-256 of this server's state store content
// (state.StateStore.Hash) and the highest Raft index applied to it. Two
// servers that applied the same log prefix report the same hash and index;
// the multi-server tests compare them to check that the FSMs agree. The
// index is read after the hash, so on a busy server it may be newer than
// the content hashed; compare hashes once writes have stopped.
func (s *Server) StateHash() (string, uint64, error) {
	st := s.fsm.State()
	h, err := st.Hash()
	if err != nil {
		return "", 0, fmt.Errorf("state hash: %w", err)
	}
	idx, err := st.LatestIndex()
	if err != nil {
		return "", 0, fmt.Errorf("state hash: %w", err)
	}
	return h, idx, nil
}
