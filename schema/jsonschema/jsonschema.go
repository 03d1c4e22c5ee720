// Package jsonschema validates documents against user-defined JSON Schemas
// (draft 2020-12 by default), compiled once with
// santhosh-tekuri/jsonschema, for registering in a [schema.Registry]. It is
// a package of its own so that only programs that define such a schema
// link that library, whose package initialisation alone compiles its
// meta-schemas; the built-in schemas of package schema are written in Go.
//
// # Invariants
//
//  1. A compiled validator's errors are [*schema.Error]s naming one leaf
//     cause, the same one for the same document on every run.
//     Code: NewJSONSchemaValidator, jsonSchemaValidator.pickCause.
//     Tests: TestNewJSONSchemaValidatorErrors, TestBuiltinsAgreeOnCorpus.
//  2. The built-in schemas' Go rules give the verdicts of their embedded
//     JSON Schemas compiled here, on the corpus and on generated
//     documents.
//     Code: NewJSONSchemaValidator.
//     Tests: TestBuiltinsAgreeOnCorpus, TestBuiltinsAgreeOnGenerated, FuzzBuiltinsAgree.
package jsonschema

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/keeppeek/statestore/schema"
)

// NewJSONSchemaValidator compiles schemaJSON (draft 2020-12 unless it says
// otherwise) once, so validation does no parsing or compiling. The schema
// must be self-contained: references to anything but itself and the
// standard meta-schemas fail to compile, because validation must not depend
// on files or the network. name labels errors when the validator is used on
// its own; a [Registry] relabels them with the registered name.
func NewJSONSchemaValidator(name string, schemaJSON []byte) (schema.Validator, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemaJSON))
	if err != nil {
		return nil, fmt.Errorf("schema %s: parse JSON schema: %w", name, err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	loc := "https://keeppeek.invalid/schema/" + url.PathEscape(name)
	if err := c.AddResource(loc, doc); err != nil {
		return nil, fmt.Errorf("schema %s: %w", name, err)
	}
	sch, err := c.Compile(loc)
	if err != nil {
		return nil, fmt.Errorf("schema %s: compile JSON schema: %w", name, err)
	}
	v := &jsonSchemaValidator{name: name, schema: sch, namePatterns: map[string][]string{}, forbidden: map[string][]string{}}
	// The definition's hash over a canonical encoding (encoding/json sorts
	// object members), so spacing and member order do not count.
	canon, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("schema %s: encode JSON schema: %w", name, err)
	}
	sum := sha256.Sum256(canon)
	v.definition = hex.EncodeToString(sum[:])
	v.index(sch)
	return v, nil
}

type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, errors.New("external schema references are not allowed")
}

type jsonSchemaValidator struct {
	name       string
	definition string // Fingerprint: the canonical definition's SHA-256
	schema     *jsonschema.Schema
	// namePatterns maps the location of every object schema that allows
	// only pattern-named members (patternProperties with
	// additionalProperties false) to those patterns, so a rejected member
	// is reported as a badly formed name rather than an unknown field.
	namePatterns map[string][]string
	// forbidden maps the location of every schema with "not": {"enum":
	// [...]} to those values, so the error can say what is forbidden
	// instead of the library's bare "'not' failed".
	forbidden map[string][]string
}

func (v *jsonSchemaValidator) Validate(doc map[string]any) error {
	err := v.schema.Validate(doc)
	if err == nil {
		return nil
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return &schema.Error{Schema: v.name, Path: "$", Reason: err.Error(), Err: err}
	}
	best := v.pickCause(doc, verr)
	return &schema.Error{Schema: v.name, Path: best.path, Reason: best.reason, Err: err}
}

type cause struct {
	depth  int
	path   string
	reason string
}

// pickCause reduces the library's tree of causes to the one a writer should
// fix: the deepest leaf, because a failed "properties" or "allOf" wrapper
// says nothing about which field is wrong. Ties go to the smallest path, so
// the answer does not depend on map iteration order inside the library.
func (v *jsonSchemaValidator) pickCause(doc map[string]any, verr *jsonschema.ValidationError) cause {
	best := cause{depth: -1} // every tree has a leaf, which beats it
	var visit func(e *jsonschema.ValidationError)
	visit = func(e *jsonschema.ValidationError) {
		_, isNames := e.ErrorKind.(*kind.PropertyNames)
		if len(e.Causes) > 0 && !isNames {
			for _, c := range e.Causes {
				visit(c)
			}
			return
		}
		c := v.describe(doc, e)
		if c.depth > best.depth ||
			c.depth == best.depth && (c.path < best.path || c.path == best.path && c.reason < best.reason) {
			best = c
		}
	}
	visit(verr)
	return best
}

var printer = message.NewPrinter(language.English)

// describe turns one leaf error into a path and a short reason. Kinds that
// are about a member rather than the object (missing, unknown or badly
// named fields) get that member appended to the path, so the path names the
// field itself.
func (v *jsonSchemaValidator) describe(doc map[string]any, e *jsonschema.ValidationError) cause {
	loc := e.InstanceLocation
	var member, reason string
	switch k := e.ErrorKind.(type) {
	case *kind.Required:
		member, reason = slices.Min(k.Missing), "missing required field"
	case *kind.DependentRequired:
		member, reason = slices.Min(k.Missing), "required when "+k.Prop+" is present"
	case *kind.AdditionalProperties:
		member, reason = slices.Min(k.Properties), "unknown field"
		if p := v.namePatterns[e.SchemaURL]; len(p) > 0 {
			reason = "field name does not match " + strings.Join(p, " or ")
		}
	case *kind.PropertyNames:
		member, reason = k.Property, "invalid field name"
		if p, ok := firstPattern(e); ok {
			reason = "field name does not match " + p
		}
	case *kind.Enum:
		want := make([]string, len(k.Want))
		for i, w := range k.Want {
			want[i] = fmt.Sprint(w)
		}
		reason = "must be one of " + strings.Join(want, ", ")
	case *kind.Const:
		reason = fmt.Sprintf("must be %v", k.Want)
	case *kind.Type:
		reason = "must be " + strings.Join(k.Want, " or ") + ", not " + k.Got
	case *kind.Pattern:
		reason = "does not match " + k.Want
	case *kind.MinLength:
		reason = "must be at least " + strconv.Itoa(k.Want) + " characters"
	case *kind.MaxLength:
		reason = "must be at most " + strconv.Itoa(k.Want) + " characters"
	case *kind.MaxItems:
		reason = printer.Sprintf("must have at most %d items, not %d", k.Want, k.Got)
	case *kind.UniqueItems:
		reason = printer.Sprintf("items %d and %d are equal: each must be unique", k.Duplicates[0], k.Duplicates[1])
	case *kind.Minimum:
		reason = "must be >= " + ratString(k.Want)
	case *kind.Maximum:
		reason = "must be <= " + ratString(k.Want)
	case *kind.ExclusiveMinimum:
		reason = "must be > " + ratString(k.Want)
	case *kind.ExclusiveMaximum:
		reason = "must be < " + ratString(k.Want)
	case *kind.FalseSchema:
		reason = "not allowed"
	case *kind.Not:
		reason = "not allowed here"
		if f := v.forbidden[e.SchemaURL]; len(f) > 0 {
			reason = "must not be " + strings.Join(f, " or ")
		}
	default:
		reason = e.ErrorKind.LocalizedString(printer)
	}
	depth := len(loc)
	if member != "" {
		depth++
	}
	return cause{depth: depth, path: instancePath(doc, loc, member), reason: reason}
}

func firstPattern(e *jsonschema.ValidationError) (string, bool) {
	if p, ok := e.ErrorKind.(*kind.Pattern); ok {
		return p.Want, true
	}
	for _, c := range e.Causes {
		if p, ok := firstPattern(c); ok {
			return p, true
		}
	}
	return "", false
}

func ratString(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	return r.FloatString(6)
}

// instancePath renders the library's instance location as a JSON path,
// walking doc alongside it because the library spells array indices and
// member names alike.
func instancePath(doc map[string]any, loc []string, member string) string {
	var b strings.Builder
	b.WriteByte('$')
	var cur any = doc
	for _, seg := range loc {
		if a, ok := cur.([]any); ok {
			i, _ := strconv.Atoi(seg) // the library's own spelling of an index
			b.WriteString("[" + strconv.Itoa(i) + "]")
			cur = nil
			if i >= 0 && i < len(a) {
				cur = a[i]
			}
			continue
		}
		m, _ := cur.(map[string]any)
		schema.AppendMemberPath(&b, seg)
		cur = m[seg]
	}
	if member != "" {
		schema.AppendMemberPath(&b, member)
	}
	return b.String()
}

// index walks the compiled schema graph once, recording what describe needs
// to explain errors in the schema's own terms.
func (v *jsonSchemaValidator) index(root *jsonschema.Schema) {
	seen := make(map[*jsonschema.Schema]bool)
	var walk func(x any)
	walk = func(x any) {
		switch s := x.(type) {
		case []*jsonschema.Schema:
			for _, c := range s {
				walk(c)
			}
		case *jsonschema.Schema:
			if s == nil || seen[s] {
				return
			}
			seen[s] = true
			if closed, ok := s.AdditionalProperties.(bool); ok && !closed && len(s.PatternProperties) > 0 {
				var pats []string
				for re := range s.PatternProperties {
					pats = append(pats, re.String())
				}
				slices.Sort(pats)
				v.namePatterns[s.Location] = pats
			}
			if s.Not != nil && s.Not.Enum != nil {
				var vals []string
				for _, x := range s.Not.Enum.Values {
					vals = append(vals, fmt.Sprintf("%q", x))
				}
				v.forbidden[s.Location] = vals
			}
			if s.DynamicRef != nil {
				walk(s.DynamicRef.Ref)
			}
			for _, c := range []any{s.Ref, s.RecursiveRef, s.Not, s.If, s.Then, s.Else, s.PropertyNames,
				s.UnevaluatedProperties, s.Contains, s.Items2020, s.UnevaluatedItems, s.ContentSchema,
				s.AllOf, s.AnyOf, s.OneOf, s.PrefixItems, s.AdditionalProperties, s.AdditionalItems, s.Items} {
				walk(c)
			}
			for _, c := range s.Properties {
				walk(c)
			}
			for _, c := range s.PatternProperties {
				walk(c)
			}
			for _, c := range s.DependentSchemas {
				walk(c)
			}
			for _, d := range s.Dependencies {
				walk(d)
			}
		}
	}
	walk(root)
}

// Fingerprint is the SHA-256 of the schema's canonical definition.
func (v *jsonSchemaValidator) Fingerprint() string { return "jsonschema:" + v.definition }
