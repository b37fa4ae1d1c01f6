package http

import (
	"path"
	"strings"

	"github.com/gpulayer/gpulayer/structs"
)

// inputRow is one artifact block of a task on the allocation page: Href
// is the download route of an artifact:// source ("" for https, whose
// URL is shown as text only).
type inputRow struct {
	Task, Source, Dest, Mode, Href string
}

// outputRow is one recorded output (or the log archive) on the page.
type outputRow struct {
	Path, Digest, Href, Name string
	Size                     int64
}

// artifactHref is the API route that streams a blob.
func artifactHref(digest string) string { return "/v1/artifact/sha256/" + digest }

// allocArtifactRows lists the allocation's inputs (its tasks' artifact
// blocks), outputs and log archive with their download links.
func allocArtifactRows(a *structs.Allocation, tasks []*structs.Task) ([]inputRow, []outputRow, *outputRow) {
	var ins []inputRow
	for _, t := range tasks {
		if t == nil {
			continue
		}
		for _, art := range t.Artifacts {
			if art == nil {
				continue
			}
			dest, err := art.Dest()
			if err != nil {
				dest = art.RelativeDest
			}
			row := inputRow{Task: t.Name, Source: art.GetterSource, Dest: dest, Mode: art.GetterMode}
			if hex, err := structs.ArtifactRefHex(art.GetterSource); err == nil {
				row.Href = artifactHref(hex)
			}
			ins = append(ins, row)
		}
	}
	var outs []outputRow
	for _, o := range a.Outputs {
		if o == nil || !structs.ValidDigest(o.Digest) {
			continue
		}
		outs = append(outs, outputRow{Path: o.Path, Digest: o.Digest, Size: o.Size, Href: artifactHref(o.Digest), Name: path.Base(o.Path)})
	}
	var logs *outputRow
	if structs.ValidDigest(a.LogArchive) {
		short := a.ID
		if i := strings.IndexByte(short, '-'); i > 0 {
			short = short[:i]
		}
		logs = &outputRow{Path: "logs.tar", Digest: a.LogArchive, Href: artifactHref(a.LogArchive), Name: "alloc-" + short + "-logs.tar"}
	}
	return ins, outs, logs
}
