-- htm_analytics addition (does not change the seed tables): which provider and model produced
-- each stored embedding, so that a search can refuse a query vector from another model. Rows
-- go with their node (ON DELETE CASCADE). Embeddings stored without this information (older
-- databases, bulk imports without a model name) simply have no row.

CREATE TABLE IF NOT EXISTS public.node_embedding_models (
    node_id bigint PRIMARY KEY REFERENCES public.nodes(id) ON DELETE CASCADE,
    provider text NOT NULL,
    model text NOT NULL,
    dimension integer NOT NULL,
    created_at timestamp with time zone NOT NULL DEFAULT CURRENT_TIMESTAMP
);

CREATE INDEX IF NOT EXISTS idx_node_embedding_models_model
    ON public.node_embedding_models USING btree (provider, model, dimension);
