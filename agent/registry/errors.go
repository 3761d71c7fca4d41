// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package registry

import (
	"encoding/json"
	"net/http"
)

// Error codes of the OCI distribution specification (UNKNOWN is the
// distribution project's code for server-side failures).
const (
	CodeBlobUnknown     = "BLOB_UNKNOWN"
	CodeDigestInvalid   = "DIGEST_INVALID"
	CodeManifestUnknown = "MANIFEST_UNKNOWN"
	CodeNameInvalid     = "NAME_INVALID"
	CodeNameUnknown     = "NAME_UNKNOWN"
	CodeUnsupported     = "UNSUPPORTED"
	CodeUnknown         = "UNKNOWN"
)

// apiError is one OCI error response.
type apiError struct {
	status  int
	code    string
	message string
	// reason overrides the refusal refusalOf derives from the status.
	reason *refusal
}

// because sets the error's refusal reason.
func (e *apiError) because(r refusal) *apiError {
	e.reason = &r
	return e
}

func (e *apiError) Error() string { return e.code + ": " + e.message }

func errorf(status int, code, message string) *apiError {
	return &apiError{status: status, code: code, message: message}
}

// writeError sends the OCI error envelope (headers only for HEAD).
func writeError(w http.ResponseWriter, r *http.Request, e *apiError) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if e.status == http.StatusMethodNotAllowed {
		h.Set("Allow", "GET, HEAD")
	}
	body, _ := json.Marshal(map[string]any{"errors": []map[string]string{{"code": e.code, "message": e.message}}})
	if r.Method == http.MethodHead {
		w.WriteHeader(e.status)
		return
	}
	w.WriteHeader(e.status)
	_, _ = w.Write(body)
}
