-- GhostKG's schema, verbatim from its DATABASE_SCHEMA document (tables and indexes).
CREATE TABLE IF NOT EXISTS nodes (
    owner_id TEXT,              -- Agent who owns this node
    id TEXT,                    -- Node identifier (entity name)
    stability REAL DEFAULT 0,   -- FSRS stability (days)
    difficulty REAL DEFAULT 0,  -- FSRS difficulty (1-10)
    last_review TIMESTAMP,      -- Last time this node was reviewed
    reps INTEGER DEFAULT 0,     -- Number of repetitions
    state INTEGER DEFAULT 0,    -- FSRS state (0=new, 1=learning, 2=review)
    created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
    sim_day INTEGER,            -- Round-based time: day number (>= 1)
    sim_hour INTEGER,           -- Round-based time: hour (0-23)
    PRIMARY KEY (owner_id, id)
);

CREATE TABLE IF NOT EXISTS edges (
    owner_id TEXT,              -- Agent who owns this edge
    source TEXT,                -- Subject entity
    target TEXT,                -- Object entity
    relation TEXT,              -- Relationship type
    weight REAL DEFAULT 1.0,    -- Connection strength
    sentiment REAL DEFAULT 0.0, -- Emotional valence (-1.0 to 1.0)
    created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
    sim_day INTEGER,            -- Round-based time: day number (>= 1)
    sim_hour INTEGER,           -- Round-based time: hour (0-23)
    PRIMARY KEY (owner_id, source, target, relation),
    FOREIGN KEY(owner_id, source) REFERENCES nodes(owner_id, id),
    FOREIGN KEY(owner_id, target) REFERENCES nodes(owner_id, id)
);

CREATE TABLE IF NOT EXISTS logs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    agent_name TEXT,            -- Agent who performed the action
    action_type TEXT,           -- Type of action (READ/WRITE)
    content TEXT,               -- Text content of the interaction
    content_uuid TEXT,          -- UUID when content is not stored
    annotations JSON,           -- Metadata in JSON format
    timestamp TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
    sim_day INTEGER,            -- Round-based time: day number (>= 1)
    sim_hour INTEGER            -- Round-based time: hour (0-23)
);

CREATE INDEX idx_nodes_owner ON nodes(owner_id);
CREATE INDEX idx_nodes_last_review ON nodes(owner_id, last_review);
CREATE INDEX idx_edges_owner_source ON edges(owner_id, source);
CREATE INDEX idx_edges_owner_target ON edges(owner_id, target);
CREATE INDEX idx_edges_created ON edges(owner_id, created_at);
CREATE INDEX idx_logs_agent ON logs(agent_name);
CREATE INDEX idx_logs_timestamp ON logs(timestamp);
CREATE INDEX idx_logs_action ON logs(action_type);
