package devserver

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"html"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/labstack/echo/v4"
	uiserver "github.com/temporalio/ui-server/v2/server"
	uiapi "github.com/temporalio/ui-server/v2/server/api"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uioptions "github.com/temporalio/ui-server/v2/server/server_options"
	"google.golang.org/grpc/metadata"

	"github.com/durable-pi/subagents/connection"
	"github.com/durable-pi/subagents/internal/errcode"
	"github.com/durable-pi/subagents/internal/ports"
)

// The Temporal UI is served behind a front of our own, on the UI's port:
//
//   - it answers only requests whose Host is a loopback name, so a web page
//     that rebinds its own name to 127.0.0.1 (DNS rebinding) reaches nothing;
//   - with an API key, it asks the browser to log in once, with a token
//     derived from the key (the link `subagents dev` prints and `subagents
//     ui` prints again), and keeps the login in an HttpOnly, SameSite=Strict
//     cookie; every other request without it is refused;
//   - the UI server itself listens on another loopback port and calls the
//     frontend with the API key only for requests that came through the
//     front (they carry a secret header the front sets): a local user who
//     finds that port gets the UI's pages, and the frontend refuses its calls.
//
// The UI's own CSRF cookie stays readable by scripts: the UI's pages read it
// to send it back as a header (the double-submit check), so it cannot be
// HttpOnly; the login cookie is what guards the UI.

// UICookie is the login cookie's name.
const UICookie = "subagents_ui"

// uiLoginMaxAge keeps a browser logged in for a month: the token never
// changes while the key does not, and the cookie only travels to loopback.
const uiLoginMaxAge = 30 * 24 * time.Hour

// uiProxyHeader carries the front's secret to the UI server behind it.
const uiProxyHeader = "X-Subagents-Ui-Front"

// UILoginURL is the link that logs a browser into this server's UI, or ""
// when the UI is off or needs no login.
func (s *Server) UILoginURL(next string) string {
	return connection.UILoginURL(s.UIURL(), s.opts.APIKey, next)
}

// uiFront is the handler on the UI's port.
type uiFront struct {
	token  string // the login token; "" without a key: no login
	secret string // what the front tells the UI server behind it
	proxy  *httputil.ReverseProxy
}

func (f *uiFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !loopbackHost(r.Host) {
		http.Error(w, "this Temporal UI answers only on this machine's loopback names (127.0.0.1, localhost, [::1])", http.StatusForbidden)
		return
	}
	if f.token != "" && r.URL.Path != "/healthz" {
		if r.URL.Path == connection.UILoginPath {
			f.login(w, r)
			return
		}
		if c, err := r.Cookie(UICookie); err != nil || !sameSecret(c.Value, f.token) {
			loginPage(w, http.StatusUnauthorized, "")
			return
		}
	}
	// Only the front speaks for the browser: a header of the same name, or
	// a bearer token of its own, from the request would be a forgery.
	r.Header.Del(uiProxyHeader)
	r.Header.Del("Authorization")
	if f.secret != "" {
		r.Header.Set(uiProxyHeader, f.secret)
	}
	f.proxy.ServeHTTP(w, r)
}

// login checks the token, keeps it in the cookie and opens next.
func (f *uiFront) login(w http.ResponseWriter, r *http.Request) {
	if !sameSecret(r.URL.Query().Get("token"), f.token) {
		loginPage(w, http.StatusUnauthorized, "That link's token is not this service's. ")
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: UICookie, Value: f.token, Path: "/",
		MaxAge: int(uiLoginMaxAge / time.Second), HttpOnly: true, SameSite: http.SameSiteStrictMode,
	})
	next := r.URL.Query().Get("next")
	// A path of this UI only: "//host" or a scheme would send the browser
	// elsewhere with a fresh login.
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.Contains(next, "\\") {
		next = "/"
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func loginPage(w http.ResponseWriter, status int, why string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = fmt.Fprintf(w, `<!doctype html><title>Log in to the subagents UI</title>
<p>%sThis Temporal UI belongs to the user who runs <code>subagents dev</code>.
Open the login link that <code>subagents ui</code> prints (also in the banner of <code>subagents dev</code>).</p>`, html.EscapeString(why))
}

func sameSecret(got, want string) bool {
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// loopbackHost is whether a request's Host (with or without a port) names
// this machine's loopback.
func loopbackHost(host string) bool {
	if _, _, err := net.SplitHostPort(host); err != nil {
		host = net.JoinHostPort(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"), "0")
	}
	return connection.IsLoopback(strings.ToLower(host))
}

// startUI starts the UI server on a private port, the front on the UI's
// port, and waits until the UI answers through the front.
func (s *Server) startUI(ctx context.Context) error {
	inner, err := ports.Free(defaultIP)
	if err != nil {
		return errcode.Wrap(errcode.ServiceUnavailable, err, "find a free port for the UI server: "+err.Error())
	}
	front := &uiFront{}
	var middleware []uiapi.Middleware
	if key := s.opts.APIKey; key != "" {
		front.token, front.secret = connection.UIToken(key), connection.DeriveSecret(key, "subagents ui front")
		bearer := "Bearer " + key
		middleware = append(middleware, func(c echo.Context) runtime.ServeMuxOption {
			fromFront := sameSecret(c.Request().Header.Get(uiProxyHeader), front.secret)
			return runtime.WithMetadata(func(context.Context, *http.Request) metadata.MD {
				if !fromFront {
					return nil
				}
				return metadata.Pairs("authorization", bearer)
			})
		})
	}
	s.ui = uiserver.NewServer(uioptions.WithConfigProvider(&uiconfig.Config{
		Host:                defaultIP,
		Port:                inner,
		TemporalGRPCAddress: s.FrontendAddress(),
		EnableUI:            true,
		DefaultNamespace:    s.opts.Namespace,
		// Plain HTTP on loopback: a secure cookie would never be sent back.
		CORS:     uiconfig.CORS{CookieInsecure: true},
		HideLogs: true,
		// No network here, and an operator's UI should not phone home.
		DisableNewsFetch: true,
	}), uioptions.WithAPIMiddleware(middleware))
	go func() { _ = s.ui.Start() }()

	target := &url.URL{Scheme: "http", Host: net.JoinHostPort(defaultIP, strconv.Itoa(inner))}
	front.proxy = httputil.NewSingleHostReverseProxy(target)
	ln, err := net.Listen("tcp", net.JoinHostPort(s.opts.UIIP, strconv.Itoa(s.opts.UIPort)))
	if err != nil {
		return errcode.Wrap(errcode.InvalidInput, err, "--ui-port: "+err.Error())
	}
	s.uiFront = &http.Server{
		Handler: front,
		// Reading a request's headers takes a browser on loopback far less;
		// a connection that trickles them holds nothing for long.
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = s.uiFront.Serve(ln) }()

	// The UI starts in well under a second; ten seconds covers a loaded CI
	// machine without hiding a UI that never comes up.
	deadline := time.Now().Add(10 * time.Second)
	client := &http.Client{Timeout: time.Second}
	for {
		resp, err := client.Get(s.UIURL() + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return errcode.New(errcode.ServiceUnavailable, "the Temporal UI did not come up on "+s.UIURL())
		}
		select {
		case <-ctx.Done():
			return errcode.Wrap(errcode.ServiceUnavailable, ctx.Err(), "waiting for the Temporal UI: "+ctx.Err().Error())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stopUI stops the front, then the UI server behind it.
func (s *Server) stopUI() {
	if s.uiFront != nil {
		if err := s.uiFront.Close(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.opts.Logger.Warn("ui front stop", "error", err)
		}
	}
	if s.ui != nil {
		s.ui.Stop()
	}
}
