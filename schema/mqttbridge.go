package schema

import (
	_ "embed"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// MQTTBridgeV1 names the desired state of one MQTT bridge, built into every
// registry from [NewRegistry] beside [MediaIntentV1]: MQTT integration state
// is a namespace class of the store itself (service/mqtt-<bridge>, where
// every TTL is refused), so its document must be known wherever a store is.
const MQTTBridgeV1 = "keeppeek.mqtt-bridge.v1"

//go:embed mqtt-bridge.v1.json
var mqttBridgeSchema []byte

// mqttBridgeValidator is the built-in validator, shared like
// mediaIntentValidator's.
func mqttBridgeValidator() Validator { return mqttBridge{} }

// mqttBridge is mqtt-bridge.v1.json written in Go (mqttBridgeRules), with
// the credential rules ahead of it. The
// schema alone refuses a "username" as an unknown field and "user@host"
// as a host that does not match its pattern, which is true but hides the
// point: the document is not where MQTT credentials go. These rules say so.
type mqttBridge struct{}

// credentialSecretsRule is what every credential refusal of an MQTT
// bridge document ends with, so the writer learns where credentials go.
const credentialSecretsRule = "MQTT credentials stay in secrets.toml under the bridge's ID, never in the document"

// urlUserinfo finds a URL carrying userinfo (scheme://user[:password]@...)
// anywhere in a string.
var urlUserinfo = regexp.MustCompile(`(?i)[a-z][a-z0-9+.-]*://[^/?#@\s]*@`)

func (m mqttBridge) Validate(doc map[string]any) error {
	var p jsonPath
	if err := mqttCredentials(&p, doc); err != nil {
		err.Schema = MQTTBridgeV1
		return err
	}
	if b, ok := doc["broker"].(map[string]any); ok {
		if h, ok := b["host"].(string); ok && strings.Contains(h, "@") {
			return &Error{Schema: MQTTBridgeV1, Path: "$.broker.host", Reason: "userinfo is not allowed in the broker endpoint: " + credentialSecretsRule}
		}
	}
	return mqttBridgeRules(doc)
}

// mqttCredentials refuses, at any depth, a member named like an MQTT login
// (the guard already refuses passwords, secrets and tokens by name) and a
// string holding a URL with userinfo. Members are visited in name order,
// so the field reported is the same on every attempt.
func mqttCredentials(p *jsonPath, v any) *Error {
	switch v := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			p.push(k, -1)
			var err *Error
			if loginName(k) {
				err = p.fail("field name looks like a login (" + k + "): " + credentialSecretsRule)
			} else {
				err = mqttCredentials(p, v[k])
			}
			p.n--
			if err != nil {
				return err
			}
		}
	case []any:
		for i, c := range v {
			p.push("", i)
			err := mqttCredentials(p, c)
			p.n--
			if err != nil {
				return err
			}
		}
	case string:
		if urlUserinfo.MatchString(v) {
			return p.fail("value holds a URL with userinfo: " + credentialSecretsRule)
		}
	}
	return nil
}

// loginName reports a member name that names an MQTT login, spelled in
// any case and with any separators: username, user, login, userinfo.
func loginName(k string) bool {
	n := string(normalizeName(nil, k))
	return strings.Contains(n, "username") || strings.Contains(n, "userinfo") || n == "user" || n == "login" || n == "userid"
}

var mqttBridgeFingerprint = sync.OnceValue(func() string {
	return builtinFingerprint("mqttBridge", mqttBridgeSchema)
})

// Fingerprint is built like mediaIntent's.
func (mqttBridge) Fingerprint() string { return mqttBridgeFingerprint() }
