package schema

import (
	"regexp"
	"strconv"
	"sync"
)

// mediaIntentRules is media-intent.v1.json in Go, keyword for keyword: the
// JSON Schema stays the specification, and the differential tests of
// package schema/jsonschema hold the two to the same verdicts.
func mediaIntentRules(doc map[string]any) error {
	var f faults
	m, _ := f.checkObject(doc, []string{"role", "desired", "source_id", "media_kind"},
		func(k string) bool { return topField(k) >= 0 })
	f.member(m, "role", func(v any) { f.checkEnum(v, topEnums[fRole]...) })
	f.member(m, "desired", func(v any) { f.checkType(v, "boolean") })
	for _, k := range []string{"source_id", "variant_id", "output_profile"} {
		f.member(m, k, f.identifier)
	}
	f.member(m, "media_kind", func(v any) { f.checkEnum(v, topEnums[fMediaKind]...) })
	f.member(m, "priority", func(v any) { f.checkInt(v, 0, priorityMax) })
	f.member(m, "recording_mode", func(v any) { f.checkEnum(v, topEnums[fRecordingMode]...) })
	f.member(m, "parameters", func(v any) {
		if !f.checkType(v, "object") {
			return
		}
		bad, found := "", false // "" is a member name too
		for k := range v.(map[string]any) {
			if !matchParamName(k) && (!found || k < bad) {
				bad, found = k, true
			}
		}
		if found {
			f.add(bad, "field name does not match "+paramNamePattern)
		}
	})
	// if role is "publish" then recording_mode is required.
	if _, ok := m["recording_mode"]; !ok && m["role"] == "publish" {
		f.add("recording_mode", "missing required field")
	}
	return f.err(MediaIntentV1)
}

// identifier is the identifier definition of media-intent.v1.json.
func (f *faults) identifier(v any) {
	if s, ok := f.checkString(v, identifierMinLen, identifierMaxLen, identifierPattern, matchIdentifier); ok && (s == "." || s == "..") {
		f.add("", `must not be "." or ".."`)
	}
}

// The patterns of mqtt-bridge.v1.json, compiled on first use so that a
// process that never validates a bridge document does not pay for them.
const (
	hostPattern   = `^(([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?))*|\[?[0-9A-Fa-f.]*:[0-9A-Fa-f:.]*\]?)$`
	filterPattern = `^(([^/+#\x00]*|\+)/)*([^/+#\x00]*|\+|#)$`
	topicPattern  = `^[^+#\x00]*$`
)

type mqttPatterns struct{ host, filter, topic *regexp.Regexp }

var mqttRegexps = sync.OnceValue(func() mqttPatterns {
	return mqttPatterns{regexp.MustCompile(hostPattern), regexp.MustCompile(filterPattern), regexp.MustCompile(topicPattern)}
})

// mqttBridgeMaxMappings is the maxItems of mappings.
const mqttBridgeMaxMappings = 64

// mqttBridgeRules is mqtt-bridge.v1.json in Go, keyword for keyword; see
// mediaIntentRules.
func mqttBridgeRules(doc map[string]any) error {
	var f faults
	re := mqttRegexps()
	m, _ := f.checkObject(doc, []string{"enabled", "broker", "mappings"}, func(k string) bool {
		return k == "enabled" || k == "broker" || k == "client_id" || k == "keepalive_seconds" || k == "mappings"
	})
	f.member(m, "enabled", func(v any) { f.checkType(v, "boolean") })
	f.member(m, "broker", func(v any) {
		b, _ := f.checkObject(v, []string{"host", "port", "tls"}, func(k string) bool { return k == "host" || k == "port" || k == "tls" })
		f.member(b, "host", func(v any) { f.checkString(v, 1, 253, hostPattern, re.host.MatchString) })
		f.member(b, "port", func(v any) { f.checkInt(v, 1, 65535) })
		f.member(b, "tls", func(v any) { f.checkType(v, "boolean") })
	})
	f.member(m, "client_id", func(v any) { f.checkString(v, 1, 64, identifierPattern, matchIdentifier) })
	f.member(m, "keepalive_seconds", func(v any) { f.checkInt(v, 5, 3600) })
	f.member(m, "mappings", func(v any) {
		if !f.checkType(v, "array") {
			return
		}
		a := v.([]any)
		if len(a) > mqttBridgeMaxMappings {
			f.add("", "must have at most "+strconv.Itoa(mqttBridgeMaxMappings)+" items, not "+groupDigits(len(a)))
		}
		if i, j, dup := firstDuplicate(a); dup {
			f.add("", "items "+groupDigits(i)+" and "+groupDigits(j)+" are equal: each must be unique")
		}
		for i, item := range a {
			f.p.push("", i)
			f.mapping(item, re)
			f.p.n--
		}
	})
	return f.err(MQTTBridgeV1)
}

// mapping is the mapping definition of mqtt-bridge.v1.json.
func (f *faults) mapping(v any, re mqttPatterns) {
	mp, _ := f.checkObject(v, []string{"direction", "local", "remote", "qos"}, func(k string) bool {
		return k == "direction" || k == "local" || k == "remote" || k == "qos"
	})
	filter := func(v any) { f.checkString(v, 1, 256, filterPattern, re.filter.MatchString) }
	topic := func(v any) { f.checkString(v, 1, 256, topicPattern, re.topic.MatchString) }
	f.member(mp, "direction", func(v any) { f.checkEnum(v, "inbound", "outbound") })
	f.member(mp, "local", filter)
	f.member(mp, "remote", filter)
	f.member(mp, "qos", func(v any) { f.checkInt(v, 0, 2) })
	// The allOf of two if/then: the side published to is a topic name.
	switch mp["direction"] {
	case "outbound":
		f.member(mp, "remote", topic)
	case "inbound":
		f.member(mp, "local", topic)
	}
}

// firstDuplicate finds the first item equal to an earlier one, and the
// first such earlier one, the pair the library reports for uniqueItems.
func firstDuplicate(a []any) (int, int, bool) {
	for i := 1; i < len(a); i++ {
		for j := range i {
			if jsonEqual(a[i], a[j]) {
				return j, i, true
			}
		}
	}
	return 0, 0, false
}

// groupDigits spells n with thousands separators, as the library's English
// message printer does.
func groupDigits(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
