-- Arandu's tables as its database-schema document lists them (column names and types; the
-- document gives no DDL, so types map as written: UUID, TEXT, VARCHAR, VECTOR, FLOAT, INT,
-- BOOLEAN, TIMESTAMP, JSONB). Vectors are 1536-d here.
CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE memory_events (
    id UUID PRIMARY KEY, agent_id TEXT, content TEXT, embedding VECTOR(1536),
    emotion VARCHAR, emotion_intensity FLOAT, energy_level VARCHAR, created_at TIMESTAMP);

CREATE TABLE memory_clusters (
    id UUID PRIMARY KEY, agent_id TEXT, entity_type VARCHAR, entity_key VARCHAR,
    summary TEXT, embedding VECTOR(1536), created_at TIMESTAMP);

CREATE TABLE memory_facts (
    id UUID PRIMARY KEY, agent_id TEXT, entity_type VARCHAR, entity_key VARCHAR,
    entity_name VARCHAR, attribute_key VARCHAR, fact_text TEXT, embedding VECTOR(1536),
    confidence FLOAT, importance FLOAT,
    source_event_id UUID REFERENCES memory_events(id),
    supersedes_fact_id UUID REFERENCES memory_facts(id),
    valid_from TIMESTAMP, valid_to TIMESTAMP, invalidated_at TIMESTAMP, is_stale BOOLEAN,
    last_confirmed_at TIMESTAMP, times_retrieved INT, last_retrieved_at TIMESTAMP,
    source_context VARCHAR, cluster_id UUID REFERENCES memory_clusters(id),
    created_at TIMESTAMP);

CREATE TABLE memory_fact_entity_links (
    id UUID PRIMARY KEY, fact_id UUID REFERENCES memory_facts(id) ON DELETE CASCADE,
    entity_key VARCHAR, is_primary BOOLEAN, agent_id TEXT, UNIQUE (fact_id, entity_key));
CREATE INDEX ON memory_fact_entity_links (agent_id, entity_key);
CREATE INDEX ON memory_fact_entity_links (fact_id);

CREATE TABLE memory_entities (
    id UUID PRIMARY KEY, agent_id TEXT, canonical_key VARCHAR, display_name VARCHAR,
    entity_type VARCHAR, embedding_vec VECTOR(1536), summary_text TEXT, profile_text TEXT,
    profile_refreshed_at TIMESTAMP, importance_score FLOAT, fact_count INT, is_active BOOLEAN);

CREATE TABLE memory_entity_aliases (
    id UUID PRIMARY KEY, agent_id TEXT, alias VARCHAR, canonical_entity_key VARCHAR,
    canonical_entity_type VARCHAR, UNIQUE (agent_id, alias));

CREATE TABLE memory_entity_relationships (
    id UUID PRIMARY KEY, agent_id TEXT, source_entity_key VARCHAR, target_entity_key VARCHAR,
    rel_type VARCHAR, strength FLOAT, evidence_fact_id UUID REFERENCES memory_facts(id),
    valid_from TIMESTAMP, valid_to TIMESTAMP, invalidated_at TIMESTAMP,
    UNIQUE (agent_id, source_entity_key, target_entity_key, rel_type));

CREATE TABLE memory_meta_observations (
    id UUID PRIMARY KEY, agent_id TEXT, observation_type VARCHAR, content TEXT,
    supporting_fact_ids JSONB, is_active BOOLEAN, created_at TIMESTAMP);

CREATE TABLE memory_attribute_registry (
    id UUID PRIMARY KEY, agent_id TEXT, attribute_key VARCHAR, first_seen_at TIMESTAMP);

CREATE TABLE memory_intentions (
    id UUID PRIMARY KEY, agent_id TEXT, intention TEXT, source_event_id UUID,
    confidence FLOAT, created_at TIMESTAMP);
