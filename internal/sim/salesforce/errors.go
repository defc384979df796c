package salesforce

import (
	"encoding/json"
	"net/http"
	"strings"
)

// Salesforce REST error codes the org produces.
const (
	CodeMalformedQuery          = "MALFORMED_QUERY"
	CodeInvalidField            = "INVALID_FIELD"
	CodeInvalidType             = "INVALID_TYPE"
	CodeInvalidQueryFilter      = "INVALID_QUERY_FILTER_OPERATOR"
	CodeInvalidQueryLocator     = "INVALID_QUERY_LOCATOR"
	CodeBigObjectUnsupported    = "BIG_OBJECT_UNSUPPORTED_OPERATION"
	CodeNumberOutsideRange      = "NUMBER_OUTSIDE_VALID_RANGE"
	CodeInvalidSessionID        = "INVALID_SESSION_ID"
	CodeRequestLimitExceeded    = "REQUEST_LIMIT_EXCEEDED"
	CodeInsufficientAccess      = "INSUFFICIENT_ACCESS"
	CodeAPIDisabledForOrg       = "API_DISABLED_FOR_ORG"
	CodeNotFound                = "NOT_FOUND"
	CodeMethodNotAllowed        = "METHOD_NOT_ALLOWED"
	CodeServerUnavailable       = "SERVER_UNAVAILABLE"
	CodeUnknownException        = "UNKNOWN_EXCEPTION"
	CodeInvalidTypeForOperation = "INVALID_TYPE_FOR_OPERATION"
)

// apiError is a REST error answered as Salesforce's JSON array body.
type apiError struct {
	status int
	code   string
	msg    string
}

func (e *apiError) Error() string { return e.code + ": " + e.msg }

func newAPIError(status int, code, msg string) *apiError {
	return &apiError{status: status, code: code, msg: msg}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`[{"message":"encoding failed","errorCode":"UNKNOWN_EXCEPTION"}]`)
	}
	w.Header().Set("Content-Type", "application/json;charset=UTF-8")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func writeAPIError(w http.ResponseWriter, e *apiError) {
	writeJSON(w, e.status, []map[string]any{{"message": e.msg, "errorCode": e.code}})
}

// oauthError is an error of the token endpoint: {error, error_description}.
func writeOAuthError(w http.ResponseWriter, status int, code, desc string) {
	writeJSON(w, status, map[string]string{"error": code, "error_description": desc})
}

// soqlError builds Salesforce's positioned SOQL error message:
//
//	\n<query line>\n<spaces>^\nERROR at Row:1:Column:N\n<detail>
func soqlError(code, query string, pos int, detail string) *apiError {
	if pos < 0 {
		pos = 0
	}
	if pos > len(query) {
		pos = len(query)
	}
	row, col, lineStart := 1, 1, 0
	for i := 0; i < pos; i++ {
		if query[i] == '\n' {
			row++
			col = 1
			lineStart = i + 1
		} else {
			col++
		}
	}
	lineEnd := strings.IndexByte(query[lineStart:], '\n')
	line := query[lineStart:]
	if lineEnd >= 0 {
		line = query[lineStart : lineStart+lineEnd]
	}
	var b strings.Builder
	b.WriteString("\n")
	b.WriteString(line)
	b.WriteString("\n")
	b.WriteString(strings.Repeat(" ", col-1))
	b.WriteString("^\nERROR at Row:")
	b.WriteString(itoa(row))
	b.WriteString(":Column:")
	b.WriteString(itoa(col))
	b.WriteString("\n")
	b.WriteString(detail)
	return newAPIError(http.StatusBadRequest, code, b.String())
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	neg := n < 0
	if neg {
		n = -n
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}
