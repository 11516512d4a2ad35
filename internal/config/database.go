package config

import (
	"fmt"
	"os"

	"gopkg.in/yaml.v3"
)

// LoadDatabase reads only what connecting to Postgres needs from the file
// at path: database_url and database.max_conns, ${VAR} expanded. The rest
// of the file is neither expanded nor validated, so a migration step given
// database credentials alone (no source secrets in its environment) can
// run `hookline migrate`. Errors wrap ErrInvalid and name the field; an
// empty database_url is the caller's to refuse (app.NewPool does).
func LoadDatabase(path string) (*Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, wrap(fmt.Errorf("read config: %w", err))
	}
	root, err := document(raw)
	if err != nil {
		return nil, err
	}
	// Keep the two top-level keys, drop the rest.
	kept := &yaml.Node{Kind: yaml.MappingNode}
	if len(root.Content) == 1 && root.Content[0].Kind == yaml.MappingNode {
		top := root.Content[0]
		for i := 0; i+1 < len(top.Content); i += 2 {
			if k := top.Content[i].Value; k == "database_url" || k == "database" {
				kept.Content = append(kept.Content, top.Content[i], top.Content[i+1])
			}
		}
	}
	c, err := decode(&yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{kept}}, os.LookupEnv)
	if err != nil {
		return nil, err
	}
	if err := c.validateDatabase(); err != nil {
		return nil, err
	}
	return c, nil
}
