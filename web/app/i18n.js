// @ts-check
/**
 * German and English labels (German by default, switchable; the choice is
 * kept in localStorage), and dates in the curator's own locale.
 */

const LANG_KEY = 'kartei.lang';

/** @type {Record<string, Record<string, string>>} */
const LABELS = {
  de: {
    'err.UNAUTHENTICATED': 'Nicht angemeldet oder die Anmeldung ist abgelaufen. Bitte neu anmelden.',
    'err.FORBIDDEN': 'Dafür fehlt Ihrer Anmeldung die Rolle. Bitte eine Redakteurin oder einen Admin fragen.',
    'err.CONFLICT': 'Jemand anderes hat das eben geändert. Die Zeile zeigt jetzt den neuen Stand; bitte prüfen und erneut entscheiden.',
    'err.INVALID_TRANSITION': 'Dieser Statuswechsel ist im Arbeitsablauf nicht vorgesehen.',
    'err.NOT_FOUND': 'Nicht (mehr) vorhanden. Bitte die Seite neu laden.',
    'err.NOTHING_TO_RELEASE': 'Nichts ist angenommen, also gibt es nichts freizugeben. Die letzte Freigabe bleibt, wie sie war.',
    'err.UNAVAILABLE': 'Der Server ist gerade nicht erreichbar. Bitte gleich noch einmal versuchen.',
    'err.TIMEOUT': 'Das hat zu lange gedauert. Bitte noch einmal versuchen, bei Massenaktionen mit weniger Zeilen.',
    'err.STORAGE_FULL': 'Der Speicher des Servers ist voll; Änderungen sind nicht möglich. Bitte den Betrieb verständigen.',
    'err.RESPONSE_TOO_LARGE': 'Die Antwort wäre zu groß. Bitte weniger Zeilen auf einmal anfordern.',
    'err.BAD_CURSOR': 'Die Seitenangabe passt nicht mehr zu dieser Liste. Bitte von vorn blättern.',
    'err.INTERNAL': 'Auf dem Server ist ein Fehler aufgetreten. Bitte noch einmal versuchen und sonst den Betrieb verständigen.',
    skip: 'Zum Inhalt springen',
    queue: 'Prüfliste',
    object: 'Objekt',
    release: 'Freigabe',
    suggestions: 'Bildvorschläge',
    crawl: 'Crawler',
    jobs: 'Aufträge',
    gnd: 'GND',
    relatedGnd: 'Verwandte GND-Begriffe',
    categoryPath: 'Kategorien',
    synonyms: 'Synonyme',
    note: 'Anmerkung',
    noUndo: 'Nichts zum Zurücknehmen: eine Aktion lässt sich zehn Minuten lang zurücknehmen, solange niemand die Zeilen seither geändert hat.',
    keywordNotInPortal: '„{label}“ gehört nicht zu diesem Portal. Bitte ein Schlagwort aus dem gewählten Portal suchen.',
    imageERROR: 'Verarbeitung fehlgeschlagen (kein Bild, zu groß, beschädigt oder nicht abrufbar)',
    imageRETRY: 'Abruf fehlgeschlagen, wird erneut versucht',
    imagePROCESSING: 'wird abgerufen und skaliert',
    imageDELETING: 'wird entfernt (nicht mehr verwendet)',
    source: 'Quelle',
    createdBy: 'angelegt von {who} · {when}',
    someOf: '{n} von {m}',
    unknownKeyword: 'Schlagwort {id} (unbekannt)',
    releaseConfirm: '{n} angenommene Zuordnungen werden veröffentlicht und zur Neuindizierung vorgemerkt. Freigeben?',
    releaseGo: 'Ja, freigeben',
    cancel: 'Abbrechen',
    nothingWaiting: 'Nichts angenommen: es gibt nichts freizugeben.',
    ranBy: 'von {who}',
    jobsHint: 'Importe, Datensatzwechsel und Wartung, die neuesten zuerst (auf dem Server oder über die Kommandozeile gestartet).',
    noJobs: 'Noch kein Auftrag.',
    jobKind: 'Befehl',
    jobBy: 'Gestartet von',
    jobInput: 'Eingabe',
    jobTime: 'Beginn / Ende',
    jobProgress: 'Gelesen',
    jobErrors: 'Fehlerhafte Zeilen',
    jobResult: 'Ergebnis',
    jobLines: 'Ausgabe',
    jobRead: '{p} % gelesen',
    jobRUNNING: 'läuft',
    jobDONE: 'fertig',
    jobFAILED: 'fehlgeschlagen',
    jobCANCELLED: 'abgebrochen',
    jobINTERRUPTED: 'unterbrochen',
    signIn: 'Anmelden',
    signOut: 'Abmelden',
    language: 'English',
    languageLabel: 'Sprache wechseln',
    reader: 'Gast (nur lesen)',
    roles: 'Rollen',
    tokenLabel: 'Token (JWT)',
    tokenHelp: 'Ein Token erzeugt die Betreiberin mit „kartei token --subject NAME --role editor“. Im lokalen Schnellstart druckt „kartei serve --demo“ ein Admin-Token.',
    tokenRefused: 'Das Token wurde abgelehnt',
    sessionExpired: 'Die Sitzung ist abgelaufen. Bitte erneut anmelden; die Auswahl bleibt erhalten.',
    signedInAs: 'Angemeldet als {sub}',
    portal: 'Portal',
    categories: 'Kategorien',
    searchKeywords: 'Schlagwort suchen',
    searchHint: 'Pfeiltasten wählen, Enter filtert die Liste',
    searchPickHint: 'Pfeiltasten wählen, Enter übernimmt das Schlagwort',
    noMatches: 'Keine Treffer',
    status: 'Status',
    creator: 'Ersteller:in',
    anyCreator: 'alle',
    keyword: 'Schlagwort',
    keywordFilter: 'Schlagwort: {label}',
    clearFilter: 'Filter entfernen',
    export: 'Export',
    exportFilter: 'Diesen Filter als Datei exportieren',
    exported: 'Export gespeichert',
    'err.TOO_MANY_EXPORTS': 'Gerade laufen zu viele Exporte. Bitte gleich noch einmal versuchen.',
    category: 'Kategorie',
    confidence: 'Konfidenz',
    age: 'Alter',
    image: 'Bild',
    actions: 'Aktionen',
    select: 'Auswählen',
    selectAll: 'Alle auf dieser Seite auswählen',
    selected: '{n} ausgewählt',
    accept: 'Annehmen',
    reject: 'Ablehnen',
    proposeDeletion: 'Löschung vorschlagen',
    delete: 'Löschen',
    keep: 'Behalten',
    undo: 'Rückgängig',
    undone: 'Rückgängig gemacht',
    nextPage: 'Nächste Seite',
    prevPage: 'Vorige Seite',
    firstPage: 'Erste Seite',
    empty: 'Nichts zu prüfen.',
    loading: 'Lädt …',
    applied: 'erledigt',
    conflict: 'Konflikt: inzwischen {status}',
    conflictBy: 'Konflikt: {who} hat es inzwischen auf {status} gesetzt',
    shortcuts: 'Tastenkürzel',
    shortcutsHelp: 'j / k: nächste / vorige Zeile · x: auswählen · a: annehmen · r: ablehnen · d: Löschung vorschlagen · u: rückgängig · /: Suche · ?: diese Hilfe',
    close: 'Schließen',
    openObject: 'Objekt {id} öffnen',
    objectId: 'Objekt-ID (DDB)',
    show: 'Anzeigen',
    assignmentsOfObject: 'Zuordnungen',
    images: 'Bilder',
    noImages: 'Keine Bilder gespeichert.',
    zoomIn: 'Vergrößern',
    zoomOut: 'Verkleinern',
    zoomReset: 'Ganzes Bild',
    addKeyword: 'Schlagwort hinzufügen',
    add: 'Hinzufügen',
    added: 'Schlagwort hinzugefügt',
    pickKeyword: 'Zuerst ein Schlagwort wählen',
    releaseWaiting: 'Angenommen und wartend',
    runRelease: 'Freigabe starten',
    releaseDone: 'Freigabe beendet: {n} veröffentlicht',
    releaseHistory: 'Letzte Freigaben',
    successful: 'erfolgreich',
    failed: 'fehlgeschlagen',
    published: 'veröffentlicht',
    noRuns: 'Noch keine Freigabe.',
    more: 'und weitere',
    wiki: 'Wiki',
    pageId: 'Seiten-ID',
    randomPage: 'Zufällige Seite',
    datasets: 'Datensätze',
    current: 'aktuell',
    noSuggestions: 'Keine offenen Vorschläge für diese Seite.',
    foundOn: 'gefunden in',
    feedbackSaved: 'Rückmeldung gespeichert',
    domains: 'Domains',
    state: 'Zustand',
    priority: 'Priorität',
    links: 'Links',
    uncrawled: 'ungecrawlt',
    excluded: 'ausgeschlossen',
    binaryOrUrl: 'Binary-Referenz oder URL',
    crawlStatus: 'Crawl-Status',
    history: 'Verlauf',
    notFound: 'Nicht gefunden.',
    error: 'Fehler',
    forbiddenView: 'Dafür fehlt die Rolle.',
    results: '{ok} erledigt, {failed} nicht',
    live: 'live',
    offline: 'getrennt',
    changedLive: '{n} Änderungen von anderen',
    imported: '{n} neue Zuordnungen importiert – neu laden',
  },
  en: {
    'err.UNAUTHENTICATED': 'Not signed in, or the sign-in has expired. Please sign in again.',
    'err.FORBIDDEN': 'Your sign-in lacks the role for this. Please ask an editor or an admin.',
    'err.CONFLICT': 'Someone else changed this just now. The row shows the new state; please check and decide again.',
    'err.INVALID_TRANSITION': 'The workflow has no such status change.',
    'err.NOT_FOUND': 'Not there (any more). Please reload the page.',
    'err.NOTHING_TO_RELEASE': 'Nothing is accepted, so there is nothing to release. The last release stays as it was.',
    'err.UNAVAILABLE': 'The server cannot be reached right now. Please try again in a moment.',
    'err.TIMEOUT': 'That took too long. Please try again, with fewer rows for bulk actions.',
    'err.STORAGE_FULL': "The server's storage is full; changes are not possible. Please tell the operators.",
    'err.RESPONSE_TOO_LARGE': 'The answer would be too large. Please ask for fewer rows at once.',
    'err.BAD_CURSOR': 'The page position no longer fits this list. Please page from the start.',
    'err.INTERNAL': 'Something went wrong on the server. Please try again, and tell the operators if it stays.',
    skip: 'Skip to content',
    queue: 'Review queue',
    object: 'Object',
    release: 'Release',
    suggestions: 'Image suggestions',
    crawl: 'Crawler',
    jobs: 'Jobs',
    gnd: 'GND',
    relatedGnd: 'Related GND concepts',
    categoryPath: 'Categories',
    synonyms: 'Synonyms',
    note: 'Note',
    noUndo: 'Nothing to undo: an action can be undone for ten minutes, while nobody has changed its rows since.',
    keywordNotInPortal: '“{label}” is not in this portal. Please search a keyword of the chosen portal.',
    imageERROR: 'processing failed (not an image, too large, corrupt, or not reachable)',
    imageRETRY: 'fetching failed, will be tried again',
    imagePROCESSING: 'being fetched and scaled',
    imageDELETING: 'being removed (no longer used)',
    source: 'source',
    createdBy: 'created by {who} · {when}',
    someOf: '{n} of {m}',
    unknownKeyword: 'Keyword {id} (unknown)',
    releaseConfirm: '{n} accepted assignments will be published and queued for reindexing. Release?',
    releaseGo: 'Yes, release',
    cancel: 'Cancel',
    nothingWaiting: 'Nothing accepted: there is nothing to release.',
    ranBy: 'by {who}',
    jobsHint: 'Imports, dataset switches and maintenance, newest first (started on the server or from the command line).',
    noJobs: 'No job yet.',
    jobKind: 'Command',
    jobBy: 'Started by',
    jobInput: 'Input',
    jobTime: 'Start / end',
    jobProgress: 'Read',
    jobErrors: 'Bad lines',
    jobResult: 'Result',
    jobLines: 'Output',
    jobRead: '{p} % read',
    jobRUNNING: 'running',
    jobDONE: 'done',
    jobFAILED: 'failed',
    jobCANCELLED: 'cancelled',
    jobINTERRUPTED: 'interrupted',
    signIn: 'Sign in',
    signOut: 'Sign out',
    language: 'Deutsch',
    languageLabel: 'Switch language',
    reader: 'Guest (read only)',
    roles: 'Roles',
    tokenLabel: 'Token (JWT)',
    tokenHelp: 'The operator mints a token with “kartei token --subject NAME --role editor”. In the local quick start, “kartei serve --demo” prints an admin token.',
    tokenRefused: 'The token was refused',
    sessionExpired: 'Your session has expired. Please sign in again; your selection is kept.',
    signedInAs: 'Signed in as {sub}',
    portal: 'Portal',
    categories: 'Categories',
    searchKeywords: 'Search keywords',
    searchHint: 'Arrow keys choose, Enter filters the queue',
    searchPickHint: 'Arrow keys choose, Enter picks the keyword',
    noMatches: 'No matches',
    status: 'Status',
    creator: 'Creator',
    anyCreator: 'any',
    keyword: 'Keyword',
    keywordFilter: 'Keyword: {label}',
    clearFilter: 'Clear filter',
    export: 'Export',
    exportFilter: 'Export this filter as a file',
    exported: 'Export saved',
    'err.TOO_MANY_EXPORTS': 'Too many exports are running. Please try again in a moment.',
    category: 'Category',
    confidence: 'Confidence',
    age: 'Age',
    image: 'Image',
    actions: 'Actions',
    select: 'Select',
    selectAll: 'Select all on this page',
    selected: '{n} selected',
    accept: 'Accept',
    reject: 'Reject',
    proposeDeletion: 'Propose deletion',
    delete: 'Delete',
    keep: 'Keep',
    undo: 'Undo',
    undone: 'Undone',
    nextPage: 'Next page',
    prevPage: 'Previous page',
    firstPage: 'First page',
    empty: 'Nothing to review.',
    loading: 'Loading …',
    applied: 'done',
    conflict: 'Conflict: now {status}',
    conflictBy: 'Conflict: {who} set it to {status} meanwhile',
    shortcuts: 'Keyboard shortcuts',
    shortcutsHelp: 'j / k: next / previous row · x: select · a: accept · r: reject · d: propose deletion · u: undo · /: search · ?: this help',
    close: 'Close',
    openObject: 'Open object {id}',
    objectId: 'Object id (DDB)',
    show: 'Show',
    assignmentsOfObject: 'Assignments',
    images: 'Images',
    noImages: 'No images stored.',
    zoomIn: 'Zoom in',
    zoomOut: 'Zoom out',
    zoomReset: 'Whole image',
    addKeyword: 'Add a keyword',
    add: 'Add',
    added: 'Keyword added',
    pickKeyword: 'Pick a keyword first',
    releaseWaiting: 'Accepted and waiting',
    runRelease: 'Run release',
    releaseDone: 'Release finished: {n} published',
    releaseHistory: 'Last release runs',
    successful: 'successful',
    failed: 'failed',
    published: 'published',
    noRuns: 'No release yet.',
    more: 'and more',
    wiki: 'Wiki',
    pageId: 'Page id',
    randomPage: 'Random page',
    datasets: 'Datasets',
    current: 'current',
    noSuggestions: 'No open suggestions for this page.',
    foundOn: 'found on',
    feedbackSaved: 'Feedback saved',
    domains: 'Domains',
    state: 'State',
    priority: 'Priority',
    links: 'Links',
    uncrawled: 'uncrawled',
    excluded: 'excluded',
    binaryOrUrl: 'Binary reference or URL',
    crawlStatus: 'Crawl status',
    history: 'History',
    notFound: 'Not found.',
    error: 'Error',
    forbiddenView: 'Your roles do not allow this.',
    results: '{ok} done, {failed} not',
    live: 'live',
    offline: 'disconnected',
    changedLive: '{n} changes by others',
    imported: '{n} new assignments imported – reload',
  },
};

/** Status names as curators say them. */
const STATUS = {
  de: {
    AUTOSUGGESTED: 'maschinell vorgeschlagen',
    SUGGESTED: 'vorgeschlagen',
    DELETESUGGESTED: 'Löschung vorgeschlagen',
    ACCEPTED: 'angenommen',
    REJECTED: 'abgelehnt',
    PUBLISHED: 'veröffentlicht',
    DELETED: 'gelöscht',
    REVIEW: 'alle Vorschläge',
  },
  en: {
    AUTOSUGGESTED: 'machine suggested',
    SUGGESTED: 'suggested',
    DELETESUGGESTED: 'deletion proposed',
    ACCEPTED: 'accepted',
    REJECTED: 'rejected',
    PUBLISHED: 'published',
    DELETED: 'deleted',
    REVIEW: 'all suggestions',
  },
};

/** @returns {'de' | 'en'} */
export function lang() {
  return localStorage.getItem(LANG_KEY) === 'en' ? 'en' : 'de';
}

/** @param {'de' | 'en'} value */
export function setLang(value) {
  localStorage.setItem(LANG_KEY, value);
  document.documentElement.lang = value;
}

/**
 * A label in the current language, with `{name}` filled from `params`.
 * @param {string} key
 * @param {Record<string, string | number>} [params]
 */
export function t(key, params = {}) {
  const text = LABELS[lang()][key] ?? LABELS.en[key] ?? key;
  return text.replace(/\{(\w+)\}/g, (_, name) => String(params[name] ?? ''));
}

/** The curator's text for an error code, or null when there is none. @param {string} code */
export function errorLabel(code) {
  return LABELS[lang()][`err.${code}`] ?? null;
}

/** @param {string} status */
export function statusLabel(status) {
  return /** @type {Record<string, string>} */ (STATUS[lang()])[status] ?? status;
}

/** The curator's own locale for dates and numbers (the browser's). */
function locale() {
  return navigator.languages && navigator.languages.length ? navigator.languages[0] : navigator.language;
}

/** @param {string | null | undefined} iso */
export function formatDate(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return new Intl.DateTimeFormat(locale(), { dateStyle: 'medium', timeStyle: 'short' }).format(d);
}

/** How long ago, in the UI's language ("vor 3 Tagen"). @param {string} iso */
export function formatAge(iso) {
  const d = new Date(iso).getTime();
  if (Number.isNaN(d)) return '';
  const seconds = Math.round((d - Date.now()) / 1000);
  const rtf = new Intl.RelativeTimeFormat(lang(), { numeric: 'auto' });
  /** @type {[Intl.RelativeTimeFormatUnit, number][]} */
  const units = [['year', 31536000], ['month', 2592000], ['day', 86400], ['hour', 3600], ['minute', 60]];
  for (const [unit, size] of units) {
    if (Math.abs(seconds) >= size) return rtf.format(Math.round(seconds / size), unit);
  }
  return rtf.format(seconds, 'second');
}

/** @param {number} n */
export function formatNumber(n) {
  return new Intl.NumberFormat(locale(), { maximumFractionDigits: 2 }).format(n);
}
