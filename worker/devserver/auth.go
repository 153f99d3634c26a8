package devserver

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/subtle"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/config"
)

// An embedded server with an API key (Options.APIKey) serves its frontend
// to callers that present it and to no one else: the worker runs agents as
// the user who started it, and every local account can reach a loopback
// port. Two doors need closing:
//
//   - the frontend: a claim mapper gives the key's holder the system admin
//     role, Temporal's default authorizer refuses everyone else (health
//     checks and GetSystemInfo stay open, as in Temporal);
//   - the server's own services (history, matching, and the internal
//     frontend its system workers use), which listen on loopback ports of
//     their own and have no authorization at all: they speak mutual TLS
//     with a certificate authority made in memory at each start, so only
//     this process holds a certificate they accept.
//
// The internal frontend is what lets the system workers (schedules,
// batches, namespace deletion) in without the key: they reach it over that
// mutual TLS, and its certificate's subject is their claim.

// internodeName is the name every internal certificate is issued to and
// verified against: the services listen on IPs, and one fixed name keeps
// verification independent of which.
const internodeName = "internode.subagents.invalid"

// internodeValidity outlives any process: the authority is made anew at each
// start, so a certificate never needs renewing while it is in use.
const internodeValidity = 10 * 365 * 24 * time.Hour

// keyClaims maps the API key, or a certificate of this process's internal
// authority, to the system admin role; anything else gets no claims.
type keyClaims struct {
	bearer []byte // "Bearer <key>", as the SDK's API key credentials send it
}

func (k keyClaims) GetClaims(info *authorization.AuthInfo) (*authorization.Claims, error) {
	// A subject exists only on a verified chain, and only the internode
	// listeners ask for certificates, all issued by this process.
	if info.TLSSubject != nil && info.TLSSubject.CommonName == internodeName {
		return &authorization.Claims{Subject: internodeName, System: authorization.RoleAdmin, AuthType: "mtls"}, nil
	}
	if subtle.ConstantTimeCompare([]byte(info.AuthToken), k.bearer) == 1 {
		return &authorization.Claims{Subject: "subagents", System: authorization.RoleAdmin, AuthType: "api-key"}, nil
	}
	return &authorization.Claims{}, nil
}

// keyAuthorizer is Temporal's default authorizer, with the reason a caller
// without the key is refused: the generic "Request unauthorized" would not
// tell a user what to pass. It says so as an error (which the frontend
// passes through: frontend.exposeAuthorizerErrors), not as a deny decision,
// whose reason the SDK and Temporal's CLI keep out of the message.
type keyAuthorizer struct{ authorization.Authorizer }

// refusedReason is what a caller without the key reads.
const refusedReason = "Request unauthorized: this Temporal belongs to a subagents service and answers only callers that present its API key (the frontend.key file in its data dir)"

func (a keyAuthorizer) Authorize(ctx context.Context, claims *authorization.Claims, target *authorization.CallTarget) (authorization.Result, error) {
	res, err := a.Authorizer.Authorize(ctx, claims, target)
	if err == nil && res.Decision != authorization.DecisionAllow {
		return res, serviceerror.NewPermissionDenied(refusedReason, "")
	}
	return res, err
}

// internodeTLS makes a certificate authority and one certificate it signs,
// for both ends of every internal connection, and the TLS settings that
// require it.
func internodeTLS() (config.GroupTLS, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return config.GroupTLS{}, err
	}
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "subagents internode authority"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(internodeValidity),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return config.GroupTLS{}, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return config.GroupTLS{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return config.GroupTLS{}, err
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: internodeName},
		DNSNames:     []string{internodeName},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(internodeValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		return config.GroupTLS{}, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return config.GroupTLS{}, err
	}
	caData := pemData("CERTIFICATE", caDER)
	return config.GroupTLS{
		Server: config.ServerTLS{
			CertData:          pemData("CERTIFICATE", leafDER),
			KeyData:           pemData("EC PRIVATE KEY", keyDER),
			ClientCAData:      []string{caData},
			RequireClientAuth: true,
		},
		Client: config.ClientTLS{ServerName: internodeName, RootCAData: []string{caData}},
	}, nil
}

// pemData is a PEM block base64-encoded, as the server's *Data settings take it.
func pemData(kind string, der []byte) string {
	return base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}))
}
