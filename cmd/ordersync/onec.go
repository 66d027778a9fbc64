package main

import (
	"errors"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ordersync/ordersync/internal/bytesize"
	"github.com/ordersync/ordersync/internal/config"
	"github.com/ordersync/ordersync/internal/onec/odata"
)

// odataSetupHint is where the composition of the standard interface is set.
const odataSetupHint = "publish what is missing with the standard processor «Настройка стандартного интерфейса OData» " +
	"(Администрирование → Общие настройки → Интеграция с другими программами → Настройка стандартного интерфейса OData), " +
	"and give the user the role УдаленныйДоступСтандартныйИнтерфейсOData"

func (a *app) onecCommand() *cobra.Command {
	c := &cobra.Command{Use: "onec", Short: "Check the 1C base over its standard OData interface and list its references"}
	var probeWrite bool
	check := &cobra.Command{
		Use:   "check",
		Short: "Say what the OData profile needs that the base does not publish, and resolve every configured GUID",
		Long: `onec check reads the base's $metadata (as a stream: it is many megabytes on a
real base) and says, on one screen, which entity sets and fields the profile
(onec.odata.profile) needs that the publication lacks, and the name of every
GUID the configuration holds (onec.odata.organization, .sources.<source>.partner,
…) or why it does not resolve.

--probe-write creates one draft order with a Ref_Key of ordersync's choosing and
deletes it again, and reports whether the base keeps a client's Ref_Key: where it
does, a create repeated after a lost answer is refused by 1C itself.

Exit status 0 when nothing is missing, 1 otherwise. Needs onec.interface odata.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, cfg, err := a.odataClient()
			if err != nil {
				return err
			}
			defer c.Close(cmd.Context())
			progress := func(s string) { fmt.Fprintln(a.stderr, s+" …") }
			rep, err := c.Check(cmd.Context(), probeWrite, progress)
			if err != nil {
				return fmt.Errorf("onec check: %w", err)
			}
			a.printCheck(rep)
			n := rep.Problems()
			var unset *config.Error
			if errors.As(cfg.ODataNeeds(), &unset) {
				fmt.Fprintln(a.stdout, "\nnot configured (orders cannot be written until they are):")
				for _, p := range unset.Problems {
					fmt.Fprintf(a.stdout, "  - %s\n", p)
				}
				n += len(unset.Problems)
			}
			if n > 0 {
				return &exitError{code: exitFailed, err: fmt.Errorf("onec check: %d problems", n)}
			}
			return nil
		},
	}
	check.Flags().BoolVar(&probeWrite, "probe-write", false, "create and delete one draft order to see whether the base keeps a client's Ref_Key")

	var query string
	var limit int
	refs := &cobra.Command{
		Use:   "refs CATALOG",
		Short: "List a catalog's objects by name, with their GUIDs, to fill onec.odata",
		Long: `onec refs lists the objects of a catalog (Catalog_Партнеры, or Партнеры) that
are not marked for deletion, by name, with the GUID onec.odata takes: -q narrows
them to the names that hold the text (1C compares it without regard to case).`,
		Example: `  ordersync onec refs Организации
  ordersync onec refs Партнеры -q kaspi
  ordersync onec refs Catalog_Склады`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, _, err := a.odataClient()
			if err != nil {
				return err
			}
			defer c.Close(cmd.Context())
			cands, err := c.Refs(cmd.Context(), args[0], query, limit)
			if err != nil {
				return fmt.Errorf("onec refs: %w", err)
			}
			if len(cands) == 0 {
				fmt.Fprintf(a.stdout, "no object of %s matches\n", args[0])
				return nil
			}
			w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "GUID\tCODE\tNAME")
			for _, c := range cands {
				fmt.Fprintf(w, "%s\t%s\t%s\n", c.GUID, c.Code, c.Name)
			}
			if len(cands) == limit {
				fmt.Fprintf(w, "(the first %d: narrow them with -q)\n", limit)
			}
			return w.Flush()
		},
	}
	refs.Flags().StringVarP(&query, "query", "q", "", "only the objects whose name holds this text")
	refs.Flags().IntVar(&limit, "limit", 50, "list at most this many")
	c.AddCommand(check, refs)
	return c
}

// odataClient is the OData client of the configuration, for the onec commands.
func (a *app) odataClient() (*odata.Client, *config.Config, error) {
	cfg, err := a.loadConfig()
	if err != nil {
		return nil, nil, err
	}
	if cfg.OneC.Interface != config.InterfaceOData {
		return nil, nil, usageError(errors.New("onec: the onec commands read the standard OData interface: set onec.interface to odata (with onec.odata.profile and onec.base_url …/odata/standard.odata)"))
	}
	log, err := a.logger(cfg)
	if err != nil {
		return nil, nil, err
	}
	c, err := a.buildClient(cfg, log)
	if err != nil {
		return nil, nil, err
	}
	return c.(*odata.Client), cfg, nil
}

// printCheck writes onec check's screen.
func (a *app) printCheck(r odata.Report) {
	out := a.stdout
	fmt.Fprintf(out, "profile %s: $metadata read, %s\n\n", r.Profile, bytesize.Format(r.MetadataBytes))
	if len(r.Missing) == 0 {
		fmt.Fprintln(out, "published: everything the profile needs")
	} else {
		fmt.Fprintf(out, "not published (%d):\n", len(r.Missing))
		for _, m := range r.Missing {
			fmt.Fprintf(out, "  - %s\n", m)
		}
		fmt.Fprintf(out, "  → %s\n", odataSetupHint)
	}
	switch {
	case r.MarkerLength > 0:
		fmt.Fprintf(out, "\nmarker: %s, a string of %d characters (1C cuts a longer external id: the read-back then fails that order rather than write it twice)\n", r.Marker, r.MarkerLength)
	default:
		fmt.Fprintf(out, "\nmarker: %s (its length is not in $metadata)\n", r.Marker)
	}
	fmt.Fprintln(out, "\nreferences:")
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, ref := range r.Refs {
		state := ref.Name
		if ref.Problem != "" {
			state = "✗ " + ref.Problem
			if ref.Name != "" {
				state += " (" + ref.Name + ")"
			}
		}
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\n", ref.Key, ref.Set, ref.GUID, state)
	}
	_ = w.Flush()
	if r.Probe != nil {
		p := r.Probe
		keeps := "ignores a client's Ref_Key: a create repeated after a lost answer is found by its marker alone"
		if p.KeepsRefKey {
			keeps = "keeps a client's Ref_Key: a create repeated after a lost answer is refused by 1C (key exists) and taken as found"
		}
		fmt.Fprintf(out, "\nwrite probe: the base %s\n", keeps)
		if p.Deleted {
			fmt.Fprintf(out, "  (the probe document № %s was deleted again)\n", p.Number)
		} else {
			fmt.Fprintf(out, "  %s\n", p.Note)
		}
	}
}
