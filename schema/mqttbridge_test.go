package schema_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/keeppeek/statestore/schema"
)

// bridgeDoc is the valid bridge fixture with edit applied to its decoded
// form, so each case below breaks exactly one rule.
func bridgeDoc(t *testing.T, edit func(doc map[string]any)) []byte {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(readFixture(t, filepath.Join("mqtt-bridge", "front-door.json")), &doc); err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(doc)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func broker(doc map[string]any) map[string]any { return doc["broker"].(map[string]any) }

func mapping(doc map[string]any, i int) map[string]any {
	return doc["mappings"].([]any)[i].(map[string]any)
}

func TestMQTTBridgeAccepts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		edit func(map[string]any)
	}{
		{"the fixture", nil},
		{"minimal: no client_id, no keepalive, no mappings", func(d map[string]any) {
			delete(d, "client_id")
			delete(d, "keepalive_seconds")
			d["mappings"] = []any{}
		}},
		{"disabled, plain TCP on 1883", func(d map[string]any) {
			d["enabled"] = false
			broker(d)["tls"], broker(d)["port"] = false, 1883
		}},
		{"IPv4 address", func(d map[string]any) { broker(d)["host"] = "192.168.1.20" }},
		{"IPv6 address, bare", func(d map[string]any) { broker(d)["host"] = "fd00::1" }},
		{"IPv6 address, bracketed", func(d map[string]any) { broker(d)["host"] = "[fd00::1]" }},
		{"64 mappings", func(d map[string]any) { d["mappings"] = mappings(64) }},
		{"topics with empty levels and a leading slash", func(d map[string]any) {
			mapping(d, 0)["local"], mapping(d, 0)["remote"] = "/a//b", "/x//y"
		}},
		{"a lone # filter inbound", func(d map[string]any) { mapping(d, 2)["remote"] = "#" }},
		{"a topic as long as allowed", func(d map[string]any) { mapping(d, 0)["remote"] = strings.Repeat("cam ", 64) }},
	}
	r := schema.NewRegistry()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if err := r.Validate(schema.MQTTBridgeV1, bridgeDoc(t, tc.edit)); err != nil {
				t.Fatalf("rejected: %v", err)
			}
		})
	}
}

// mappings returns n distinct outbound mappings.
func mappings(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = map[string]any{"direction": "outbound", "local": fmt.Sprintf("keeppeek/events/%d", i), "remote": "home/events", "qos": 0}
	}
	return out
}

// TestMQTTBridgeRejects holds one rule per row, with the rule that refuses:
// credentials by name are the content guard's (password, token, secret:
// "looks like a credential") or this schema's login rule (username, user,
// login); a URL with userinfo anywhere and "user@host" as the broker are
// this schema's userinfo rules; the rest are the JSON Schema's.
func TestMQTTBridgeRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		edit         func(map[string]any)
		path, reason string
	}{
		// Credentials, wherever they are put.
		{"password in the broker (guard)", func(d map[string]any) { broker(d)["password"] = "hunter2" },
			"$.broker.password", "looks like a credential (password)"},
		{"token at the top (guard)", func(d map[string]any) { d["token"] = "abc" },
			"$.token", "looks like a credential (token)"},
		{"secret in a mapping (guard)", func(d map[string]any) { mapping(d, 1)["client_secret"] = "s" },
			"$.mappings[1].client_secret", "looks like a credential (secret)"},
		{"username in the broker (login rule)", func(d map[string]any) { broker(d)["username"] = "keeppeek" },
			"$.broker.username", "looks like a login (username): MQTT credentials stay in secrets.toml"},
		{"User-Name at the top (login rule)", func(d map[string]any) { d["User-Name"] = "keeppeek" },
			`$["User-Name"]`, "looks like a login"},
		{"login in a mapping (login rule)", func(d map[string]any) { mapping(d, 0)["login"] = "keeppeek" },
			"$.mappings[0].login", "looks like a login (login)"},
		// Userinfo in the endpoint, or in any URL.
		{"user:password@ in the host (userinfo rule)", func(d map[string]any) { broker(d)["host"] = "bridge:s3cret@broker.home.arpa" },
			"$.broker.host", "userinfo is not allowed in the broker endpoint: MQTT credentials stay in secrets.toml"},
		{"user@ in the host (userinfo rule)", func(d map[string]any) { broker(d)["host"] = "bridge@broker.home.arpa" },
			"$.broker.host", "userinfo is not allowed"},
		{"a URL with userinfo as a topic (userinfo rule)", func(d map[string]any) { mapping(d, 0)["remote"] = "mqtts://bridge:pw@broker/x" },
			"$.mappings[0].remote", "URL with userinfo"},
		{"a URL for the host", func(d map[string]any) { broker(d)["host"] = "mqtts://broker.home.arpa" },
			"$.broker.host", "does not match"},
		{"host over 253 characters", func(d map[string]any) { broker(d)["host"] = strings.Repeat("a.", 127) + "a" },
			"$.broker.host", "at most 253 characters"},
		// QoS.
		{"QoS 3", func(d map[string]any) { mapping(d, 1)["qos"] = 3 }, "$.mappings[1].qos", "must be <= 2"},
		{"QoS -1", func(d map[string]any) { mapping(d, 1)["qos"] = -1 }, "$.mappings[1].qos", "must be >= 0"},
		{"QoS 1.5", func(d map[string]any) { mapping(d, 1)["qos"] = 1.5 }, "$.mappings[1].qos", "must be integer"},
		{"QoS missing", func(d map[string]any) { delete(mapping(d, 1), "qos") }, "$.mappings[1].qos", "missing required field"},
		// Bounded counts and lengths.
		{"65 mappings", func(d map[string]any) { d["mappings"] = mappings(65) }, "$.mappings", "must have at most 64 items, not 65"},
		{"a topic over 256 characters", func(d map[string]any) { mapping(d, 0)["remote"] = strings.Repeat("cam ", 64) + "x" },
			"$.mappings[0].remote", "at most 256 characters"},
		{"a client_id over 64 characters", func(d map[string]any) { d["client_id"] = strings.Repeat("c", 65) },
			"$.client_id", "at most 64 characters"},
		{"a keepalive of an hour and a second", func(d map[string]any) { d["keepalive_seconds"] = 3601 },
			"$.keepalive_seconds", "must be <= 3600"},
		// Topic rules.
		{"an outbound mapping publishing to a wildcard", func(d map[string]any) { mapping(d, 0)["remote"] = "home/+/motion" },
			"$.mappings[0].remote", "does not match ^[^+#\\x00]*$"},
		{"an inbound mapping publishing to a wildcard", func(d map[string]any) { mapping(d, 2)["local"] = "keeppeek/commands/#" },
			"$.mappings[2].local", "does not match ^[^+#\\x00]*$"},
		{"# before the last level", func(d map[string]any) { mapping(d, 0)["local"] = "keeppeek/#/motion" },
			"$.mappings[0].local", "does not match"},
		{"+ inside a level", func(d map[string]any) { mapping(d, 0)["local"] = "keeppeek/cam+/motion" },
			"$.mappings[0].local", "does not match"},
		// The guard refuses a NUL in any string before the topic pattern
		// would (no stored document may hold one).
		{"a NUL in a topic", func(d map[string]any) { mapping(d, 0)["local"] = "keeppeek/\x00" },
			"$.mappings[0].local", "NUL character"},
		{"an empty topic", func(d map[string]any) { mapping(d, 0)["local"] = "" },
			"$.mappings[0].local", "at least 1 characters"},
		{"an unknown direction", func(d map[string]any) { mapping(d, 0)["direction"] = "both" },
			"$.mappings[0].direction", "must be one of inbound, outbound"},
		{"the same mapping twice", func(d map[string]any) { d["mappings"] = []any{mapping(d, 0), mapping(d, 0)} },
			"$.mappings", "items 0 and 1 are equal"},
		// The endpoint's shape.
		{"port 0", func(d map[string]any) { broker(d)["port"] = 0 }, "$.broker.port", "must be >= 1"},
		{"port 65536", func(d map[string]any) { broker(d)["port"] = 65536 }, "$.broker.port", "must be <= 65535"},
		{"no tls flag", func(d map[string]any) { delete(broker(d), "tls") }, "$.broker.tls", "missing required field"},
		{"no broker", func(d map[string]any) { delete(d, "broker") }, "$.broker", "missing required field"},
		{"an unknown field", func(d map[string]any) { d["url"] = "broker.home.arpa" }, "$.url", "unknown field"},
	}
	r := schema.NewRegistry()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := r.Validate(schema.MQTTBridgeV1, bridgeDoc(t, tc.edit))
			mustReject(t, err, tc.path, tc.reason)
			if !strings.HasPrefix(err.Error(), "schema "+schema.MQTTBridgeV1+": ") {
				t.Errorf("%q does not name the schema", err)
			}
		})
	}
}
