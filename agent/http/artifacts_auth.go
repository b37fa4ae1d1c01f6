package http

import (
	"context"
	"errors"
	"net/http"
	"slices"

	"github.com/gpulayer/gpulayer/structs"
)

// Artifact access (Nomad has no artifact store; these follow ADR-0008's
// "access by more than knowledge of a digest"):
//
//   - uploading (PUT and POST /v1/artifacts/missing) needs submit-job in
//     ?namespace= (default "default"), where a ?job= must exist, or a node
//     secret (X-Gpulayer-Node-Secret) with ?node=<node-id> for that
//     node's outputs and logs; the replica push between servers needs a
//     server's TLS certificate or a management token (artifactReplica);
//   - reading (GET bytes, /meta, and each entry of GET /v1/artifacts) needs
//     a management token, the token that uploaded it, read-job in the
//     namespace of a job ("<namespace>/<id>": the job of that ID must be
//     in that namespace) or allocation that references it, or the secret
//     of a node that runs an allocation referencing it (or whose job
//     does); a log archive needs read-logs instead (artifactReadable);
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

// managementToken reports whether r's caller is a management token (not
// a node secret, whose request carries no ACL of its own).
func managementToken(r *http.Request) bool {
	if c := callerFrom(r); c.nodeID != "" || c.server {
		return false
	}
	acl, _ := aclFrom(r)
	return acl.IsManagement()
}

// withServerPeer returns r marked as a server peer's request.
func withServerPeer(r *http.Request) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), artifactCallerKey{}, artifactCaller{server: true}))
}

// artifactWriteNamespace is the namespace an upload acts in: ?namespace=
// ("default" when absent). A ?job= reference must name a job of that
// namespace (artifactJobRef).
func (h *handler) artifactWriteNamespace(r *http.Request) string {
	return nsOrDefault(r.URL.Query().Get("namespace"))
}

// artifactJobRef returns the JobRefs entry for an upload's ?job=id: the
// job must exist in the upload's namespace, which is ?namespace=, else
// the namespace of the upload's ?alloc= allocation (a node's upload of an
// allocation's outputs names no namespace), else "default". A job that
// does not exist there is a 400 naming it: a reference to a job not yet
// registered could be claimed later by a job of that ID in another
// namespace.
func (h *handler) artifactJobRef(r *http.Request, id, allocID string) (string, error) {
	q := &structs.QueryOptions{AllowStale: true}
	ns := r.URL.Query().Get("namespace")
	if ns == "" && allocID != "" {
		if al, _, err := h.srv.AllocGet(r.Context(), allocID, q); err == nil && al != nil {
			ns = allocNamespace(al)
		}
	}
	ns = nsOrDefault(ns)
	j, _, err := h.srv.JobGet(r.Context(), id, q)
	if err != nil && !errors.Is(err, structs.ErrNotFound) {
		return "", err
	}
	if j == nil || nsOrDefault(j.Namespace) != ns {
		return "", badRequest("job: no job %q in namespace %q (register the job first, or name its namespace with ?namespace=)", id, ns)
	}
	return structs.ArtifactJobRef(ns, id), nil
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
// rules above). With ACLs off everyone may. A log archive
// (structs.MediaTypeLogArchive) holds task logs, so reading it needs what
// the logs route needs: read-logs in the namespace of its allocation (or
// of a job it references, once the allocation is collected), a management
// token, a server, or the node that uploaded it or runs its allocation.
func (h *handler) artifactReadable(r *http.Request, a *structs.Artifact) bool {
	if !h.aclEnabled {
		return true
	}
	ctx := r.Context()
	q := &structs.QueryOptions{AllowStale: true}
	if callerFrom(r).server {
		return true
	}
	logs := a.MediaType == structs.MediaTypeLogArchive
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
			if slices.Contains(a.AllocRefs, al.ID) || !logs && slices.Contains(a.JobRefs, structs.ArtifactJobRef(allocNamespace(al), al.JobID)) {
				return true
			}
		}
		return false
	}
	acl, tok := aclFrom(r)
	if acl.IsManagement() {
		return true
	}
	if !logs && tok != nil && tok.AccessorID != "" && tok.AccessorID != "anonymous" && tok.AccessorID == a.UploadedBy {
		return true
	}
	capability := structs.NamespaceCapabilityReadJob
	if logs {
		capability = structs.NamespaceCapabilityReadLogs
	}
	allowed := func(ns string) bool { return acl.AllowNamespaceOp(nsOrDefault(ns), capability) }
	for _, ref := range a.JobRefs {
		ns, id, ok := structs.SplitArtifactJobRef(ref)
		if !ok || !allowed(ns) {
			continue
		}
		if j, _, err := h.srv.JobGet(ctx, id, q); err == nil && structs.ArtifactJobRefMatches(ref, j) {
			return true
		}
	}
	for _, id := range a.AllocRefs {
		if al, _, err := h.srv.AllocGet(ctx, id, q); err == nil && al != nil && allowed(allocNamespace(al)) {
			return true
		}
	}
	return false
}
