package postgres

// ImportTable is one table an Importer writes and its columns.
type ImportTable struct {
	Table   string
	Columns []string
}

// ImportColumns returns the tables and columns im writes, for the test
// that every column of the schema is copied.
func ImportColumns(im *Importer) []ImportTable {
	var out []ImportTable
	for _, t := range im.order {
		out = append(out, ImportTable{Table: t.name, Columns: t.cols})
	}
	return out
}
