package schema

// Has reports whether name is registered. Replay uses it to refuse records
// whose schema this build does not know without re-validating documents.
func (r *Registry) Has(name string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	_, ok := r.validators[name]
	return ok
}
