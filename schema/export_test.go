package schema

// DecodesEverywhere is decodesEverywhere for the external tests.
var DecodesEverywhere = decodesEverywhere
