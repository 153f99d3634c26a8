package connection

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/url"
)

// The local service's UI asks a browser to log in once, with a token
// derived from the API key: whoever can read the key can log in, and the
// link can be made again from the key alone (`subagents ui`), with no state
// of its own to keep.

// UILoginPath is where the browser logs in: /login?token=…&next=/path.
const UILoginPath = "/login"

// UIToken is the UI login token of the service whose API key is key.
func UIToken(key string) string { return DeriveSecret(key, "subagents ui login") }

// DeriveSecret is a secret of its own for purpose, from key: one leaked
// derived secret tells nothing of the key or of the others.
func DeriveSecret(key, purpose string) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(purpose))
	return hex.EncodeToString(m.Sum(nil))
}

// UILoginURL is the link that logs a browser into the UI at uiURL and then
// opens next (a path of that UI), or "" without a UI or a key.
func UILoginURL(uiURL, key, next string) string {
	if uiURL == "" || key == "" {
		return ""
	}
	q := url.Values{"token": {UIToken(key)}}
	if next != "" {
		q.Set("next", next)
	}
	return uiURL + UILoginPath + "?" + q.Encode()
}
