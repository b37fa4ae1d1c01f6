package http

import (
	"context"
	"net/http"
	"slices"

	"github.com/gpulayer/gpulayer/structs"
)

// Artifact access (Nomad has no artifact store; these follow ADR-0008's
// "access by more than knowledge of a digest"):
//
//   - uploading (PUT, the replica push and POST /v1/artifacts/missing)
//     needs submit-job in the namespace (the namespace of ?job= when that
//     job exists, else ?namespace=, default "default"), or a node secret
//     (X-Gpulayer-Node-Secret) with ?node=<node-id> for that node's
//     outputs and logs;
//   - reading (GET bytes, /meta, and each entry of GET /v1/artifacts) needs
//     a management token, the token that uploaded it, read-job in the
//     namespace of a job or allocation that references it, or the secret
//     of a node that runs an allocation referencing it (or whose job does);
//   - a second upload of stored bytes by a caller who may not read them
//     must send the bytes (proof of possession) before it may add a
//     reference: knowing a digest is not enough to get at its bytes.

// artifactCaller is who sends an artifact request, as the middleware
// resolved it.
type artifactCaller struct {
	// nodeID is set for a caller that proved a node secret.
	nodeID string
	// server is set for another server proven by its TLS certificate
	// (isServerPeer); it may read and push any artifact.
	server bool
}

type artifactCallerKey struct{}

// callerFrom returns the artifact caller of r (zero when not a node).
func callerFrom(r *http.Request) artifactCaller {
	c, _ := r.Context().Value(artifactCallerKey{}).(artifactCaller)
	return c
}

// authorizeArtifactNode checks the node secret of a request that carries
// one: ?node= must name the node whose secret it is. It returns the
// request carrying the caller, or errPermissionDenied.
func (h *handler) authorizeArtifactNode(r *http.Request) (*http.Request, error) {
	ns, ok := h.srv.(NodeServer)
	secret := r.Header.Get(structs.HeaderNodeSecret)
	id := r.URL.Query().Get("node")
	if !ok || secret == "" || id == "" || ns.AuthorizeNode(id, secret) != nil {
		return nil, errPermissionDenied
	}
	return r.WithContext(context.WithValue(r.Context(), artifactCallerKey{}, artifactCaller{nodeID: id})), nil
}

// isServerPeer reports whether r came over TLS with a verified client
// certificate valid for Config.ServerPeerName ("server.<region>.gpulayer"):
// another server's blob sync. Without tls.http there is no such proof.
func (h *handler) isServerPeer(r *http.Request) bool {
	// A request a follower forwarded to the leader comes with a server's
	// certificate too, on behalf of its caller: never a peer's own.
	if r.Header.Get(HeaderForwarded) != "" {
		return false
	}
	if h.serverPeerName == "" || r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return false
	}
	return r.TLS.VerifiedChains[0][0].VerifyHostname(h.serverPeerName) == nil
}

// withServerPeer returns r marked as a server peer's request.
func withServerPeer(r *http.Request) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), artifactCallerKey{}, artifactCaller{server: true}))
}

// artifactWriteNamespace is the namespace an upload acts in.
func (h *handler) artifactWriteNamespace(r *http.Request) string {
	if id := r.URL.Query().Get("job"); id != "" && h.srv != nil {
		if j, _, err := h.srv.JobGet(r.Context(), id, &structs.QueryOptions{AllowStale: true}); err == nil && j != nil {
			return nsOrDefault(j.Namespace)
		}
	}
	return nsOrDefault(r.URL.Query().Get("namespace"))
}

// uploader names the caller in Artifact.UploadedBy: "node:<id>" for a
// node (with ACLs off, any request with ?node=), the token's accessor, or
// "" with ACLs off.
func (h *handler) uploader(r *http.Request) string {
	if c := callerFrom(r); c.nodeID != "" {
		return "node:" + c.nodeID
	}
	if id := r.URL.Query().Get("node"); id != "" && !h.aclEnabled {
		return "node:" + id
	}
	_, tok := aclFrom(r)
	if tok == nil {
		return ""
	}
	return tok.AccessorID
}

// artifactReadable reports whether the caller of r may read a (see the
// rules above). With ACLs off everyone may.
func (h *handler) artifactReadable(r *http.Request, a *structs.Artifact) bool {
	if !h.aclEnabled {
		return true
	}
	ctx := r.Context()
	q := &structs.QueryOptions{AllowStale: true}
	if callerFrom(r).server {
		return true
	}
	if c := callerFrom(r); c.nodeID != "" {
		if a.UploadedBy == "node:"+c.nodeID {
			return true
		}
		ns, ok := h.srv.(NodeServer)
		if !ok {
			return false
		}
		allocs, _, err := ns.NodeAllocations(ctx, c.nodeID, q)
		if err != nil {
			return false
		}
		for _, al := range allocs {
			if slices.Contains(a.AllocRefs, al.ID) || slices.Contains(a.JobRefs, al.JobID) {
				return true
			}
		}
		return false
	}
	acl, tok := aclFrom(r)
	if acl.IsManagement() {
		return true
	}
	if tok != nil && tok.AccessorID != "" && tok.AccessorID != "anonymous" && tok.AccessorID == a.UploadedBy {
		return true
	}
	read := func(ns string) bool { return acl.AllowNamespaceOp(nsOrDefault(ns), structs.NamespaceCapabilityReadJob) }
	for _, id := range a.JobRefs {
		if j, _, err := h.srv.JobGet(ctx, id, q); err == nil && j != nil && read(j.Namespace) {
			return true
		}
	}
	for _, id := range a.AllocRefs {
		if al, _, err := h.srv.AllocGet(ctx, id, q); err == nil && al != nil && read(allocNamespace(al)) {
			return true
		}
	}
	return false
}
