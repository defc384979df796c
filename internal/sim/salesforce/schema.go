package salesforce

import (
	"fmt"
	"strings"
	"time"
)

// fieldType is a Salesforce field type as reported by describe.
type fieldType int

const (
	typeID fieldType = iota
	typeString
	typePicklist
	typeTextArea // long text area: neither filterable, sortable nor groupable
	typeDateTime
	typeDate
	typeInt
	typeDouble
	typeBoolean
	typeReference
	typeBase64
)

var fieldTypeNames = map[string]fieldType{
	"id": typeID, "string": typeString, "picklist": typePicklist, "textarea": typeTextArea,
	"datetime": typeDateTime, "date": typeDate, "int": typeInt, "double": typeDouble,
	"boolean": typeBoolean, "ref": typeReference, "base64": typeBase64,
}

func (t fieldType) describeName() string {
	switch t {
	case typeID:
		return "id"
	case typeString:
		return "string"
	case typePicklist:
		return "picklist"
	case typeTextArea:
		return "textarea"
	case typeDateTime:
		return "datetime"
	case typeDate:
		return "date"
	case typeInt:
		return "int"
	case typeDouble:
		return "double"
	case typeBoolean:
		return "boolean"
	case typeReference:
		return "reference"
	default:
		return "base64"
	}
}

func (t fieldType) soapType() string {
	switch t {
	case typeID, typeReference:
		return "tns:ID"
	case typeDateTime:
		return "xsd:dateTime"
	case typeDate:
		return "xsd:date"
	case typeInt:
		return "xsd:int"
	case typeDouble:
		return "xsd:double"
	case typeBoolean:
		return "xsd:boolean"
	case typeBase64:
		return "xsd:base64Binary"
	default:
		return "xsd:string"
	}
}

func (t fieldType) filterable() bool { return t != typeTextArea && t != typeBase64 }
func (t fieldType) sortable() bool   { return t != typeTextArea && t != typeBase64 }
func (t fieldType) groupable() bool {
	switch t {
	case typeID, typeString, typePicklist, typeReference, typeBoolean, typeDate, typeInt:
		return true
	}
	return false
}
func (t fieldType) stringLike() bool {
	switch t {
	case typeString, typePicklist, typeTextArea, typeID, typeReference:
		return true
	}
	return false
}

// fieldDef describes one field of an object.
type fieldDef struct {
	Name    string
	Type    fieldType
	Custom  bool
	RefTo   string // referenced object for reference fields
	RelName string // relationship name (e.g. LogUser for LogUserId), "" if none
	Length  int
}

// objectKind distinguishes how an object may be queried.
type objectKind int

const (
	kindStandard      objectKind = iota
	kindCustom                   // custom object (__c)
	kindBig                      // Real-Time Event Monitoring storage big object
	kindPlatformEvent            // streaming only: listed by describe, not queryable
)

// apiSurface says which query endpoints serve an object.
type apiSurface int

const (
	surfaceData apiSurface = iota
	surfaceTooling
	surfaceBoth
)

// gate is the permission that grants read access to an object.
type gate int

const (
	gateObject gate = iota // View All Data, or the object listed in Permissions.Objects
	gateAlways             // every API user (User)
	gateELF                // View Event Log Files (or View All Data)
	gateRTEM               // View Real-Time Event Monitoring Data (View All Data is not enough)
	gateSetup              // View Setup and Configuration (or View All Data)
)

type objectDef struct {
	Name    string
	Label   string
	Prefix  string
	Kind    objectKind
	Surface apiSurface
	Gate    gate
	Fields  []string // "Name:type[:refTo[:relName]]"
}

// standardObjects is the org's schema. Field lists follow the real objects
// closely enough for describe-driven clients; order is describe order.
var standardObjects = []objectDef{
	{Name: "User", Label: "User", Prefix: "005", Gate: gateAlways, Fields: []string{
		"Id:id", "Username:string", "Name:string", "FirstName:string", "LastName:string", "Email:string",
		"IsActive:boolean", "UserType:picklist", "TimeZoneSidKey:picklist", "LastLoginDate:datetime",
		"CreatedDate:datetime", "LastModifiedDate:datetime", "SystemModstamp:datetime",
	}},
	{Name: "EventLogFile", Label: "Event Log File", Prefix: "0AT", Gate: gateELF, Fields: []string{
		"Id:id", "IsDeleted:boolean", "CreatedDate:datetime", "CreatedById:ref:User:CreatedBy",
		"LastModifiedDate:datetime", "LastModifiedById:ref:User:LastModifiedBy", "SystemModstamp:datetime",
		"EventType:picklist", "LogFile:base64", "LogDate:datetime", "LogFileLength:double",
		"LogFileContentType:string", "ApiVersion:double", "Sequence:int", "Interval:picklist",
		"LogFileFieldNames:string", "LogFileFieldTypes:string",
	}},
	{Name: "LoginHistory", Label: "Login History", Prefix: "0Ya", Fields: []string{
		"Id:id", "UserId:ref:User", "LoginTime:datetime", "LoginType:picklist", "SourceIp:string",
		"LoginUrl:string", "AuthenticationServiceId:ref:AuthConfig", "LoginGeoId:ref:LoginGeo:LoginGeo",
		"TlsProtocol:picklist", "CipherSuite:picklist", "Browser:string", "Platform:string", "Status:string",
		"Application:string", "ClientVersion:string", "ApiType:string", "ApiVersion:string",
		"CountryIso:picklist", "AuthMethodReference:string",
	}},
	{Name: "SetupAuditTrail", Label: "Setup Audit Trail", Prefix: "0Ym", Gate: gateSetup, Fields: []string{
		"Id:id", "Action:string", "Section:string", "CreatedDate:datetime", "CreatedById:ref:User:CreatedBy",
		"Display:string", "DelegateUser:string", "ResponsibleNamespacePrefix:string",
		"CreatedByContext:string", "CreatedByIssuer:string",
	}},
	{Name: "Audit_Event__c", Label: "Audit Event", Prefix: "a01", Kind: kindCustom, Fields: []string{
		"Id:id", "OwnerId:ref:User:Owner", "IsDeleted:boolean", "Name:string", "CreatedDate:datetime",
		"CreatedById:ref:User:CreatedBy", "LastModifiedDate:datetime", "LastModifiedById:ref:User:LastModifiedBy",
		"SystemModstamp:datetime", "Event_Time__c:datetime", "Action__c:picklist", "Actor__c:string",
		"Details__c:textarea", "Severity__c:double", "Success__c:boolean", "Source_Ip__c:string",
	}},
	{Name: "LoginEvent", Label: "Login Event", Prefix: "0Yc", Kind: kindBig, Gate: gateRTEM, Fields: []string{
		"Id:id", "EventIdentifier:string", "EventDate:datetime", "UserId:ref:User", "Username:string",
		"LoginType:picklist", "SourceIp:string", "Status:string", "Browser:string", "Platform:string",
		"Application:string", "LoginUrl:string", "CountryIso:string", "Country:string", "City:string",
		"LoginHistoryId:ref:LoginHistory", "SessionKey:string", "LoginKey:string", "TlsProtocol:picklist",
		"CipherSuite:picklist", "AdditionalInfo:textarea", "EvaluationTime:double",
		"PolicyOutcome:picklist", "SessionLevel:picklist",
	}},
	{Name: "ApiEvent", Label: "API Event", Prefix: "0Yd", Kind: kindBig, Gate: gateRTEM, Fields: []string{
		"Id:id", "EventIdentifier:string", "EventDate:datetime", "UserId:ref:User", "Username:string",
		"SourceIp:string", "Operation:picklist", "QueriedEntities:string", "Query:textarea",
		"RowsProcessed:double", "Records:textarea", "Application:string", "Client:string",
		"ApiType:picklist", "ApiVersion:double", "ElapsedTime:int", "SessionKey:string", "LoginKey:string",
		"UserAgent:string", "PolicyOutcome:picklist",
	}},
	{Name: "ApiAnomalyEventStore", Label: "API Anomaly Event Store", Prefix: "0Yq", Gate: gateRTEM, Fields: []string{
		"Id:id", "EventIdentifier:string", "EventDate:datetime", "CreatedDate:datetime", "UserId:ref:User:User",
		"Username:string", "Score:double", "SourceIp:string", "Operation:string", "QueriedEntities:string",
		"RowsProcessed:double", "Summary:textarea",
	}},
	{Name: "ApexLog", Label: "Apex Debug Log", Prefix: "07L", Surface: surfaceBoth, Fields: []string{
		"Id:id", "LogUserId:ref:User:LogUser", "LogLength:int", "LastModifiedDate:datetime",
		"Request:picklist", "Operation:string", "Application:string", "Status:string",
		"DurationMilliseconds:int", "SystemModstamp:datetime", "StartTime:datetime", "Location:picklist",
		"RequestIdentifier:string",
	}},
	{Name: "TraceFlag", Label: "Trace Flag", Prefix: "7tf", Surface: surfaceTooling, Fields: []string{
		"Id:id", "TracedEntityId:ref:User:TracedEntity", "LogType:picklist", "StartDate:datetime",
		"ExpirationDate:datetime", "DebugLevelId:ref:DebugLevel", "CreatedDate:datetime",
	}},
	// Streaming-only channels (Pub/Sub topics); listed by describeGlobal.
	{Name: "LoginEventStream", Label: "Login Event Stream", Prefix: "0Yf", Kind: kindPlatformEvent, Gate: gateRTEM,
		Fields: []string{"EventIdentifier:string", "EventDate:datetime", "UserId:ref:User", "Username:string", "SourceIp:string", "LoginType:picklist", "Status:string"}},
	{Name: "LogoutEventStream", Label: "Logout Event Stream", Prefix: "0Yg", Kind: kindPlatformEvent, Gate: gateRTEM,
		Fields: []string{"EventIdentifier:string", "EventDate:datetime", "UserId:ref:User", "Username:string", "SourceIp:string"}},
	{Name: "ApiEventStream", Label: "API Event Stream", Prefix: "0Yh", Kind: kindPlatformEvent, Gate: gateRTEM,
		Fields: []string{"EventIdentifier:string", "EventDate:datetime", "UserId:ref:User", "Username:string", "Operation:picklist", "QueriedEntities:string", "RowsProcessed:double"}},
	{Name: "ApiAnomalyEvent", Label: "API Anomaly Event", Prefix: "0Yi", Kind: kindPlatformEvent, Gate: gateRTEM,
		Fields: []string{"EventIdentifier:string", "EventDate:datetime", "UserId:ref:User", "Username:string", "Score:double", "Summary:textarea"}},
	{Name: "Audit_Signal__e", Label: "Audit Signal", Prefix: "e01", Kind: kindPlatformEvent, Gate: gateAlways,
		Fields: []string{"CreatedDate:datetime", "CreatedById:ref:User", "EventUuid:string", "Action__c:string", "Actor__c:string", "Severity__c:double"}},
}

// object is the runtime form of an objectDef with its records.
type object struct {
	def     *objectDef
	name    string
	fields  []*fieldDef
	byLower map[string]*fieldDef
	rels    map[string]*fieldDef // lower-case relationship name → reference field
	records []*record
	seq     uint64
}

// record is one row. vals is keyed by canonical field name and holds
// string, time.Time, int64, float64, bool or nil.
type record struct {
	obj       *object
	id        string
	vals      map[string]any
	visibleAt time.Time // zero: visible immediately
	elf       *elfFile
	apex      *apexBody
}

func newObject(def *objectDef) *object {
	o := &object{def: def, name: def.Name, byLower: map[string]*fieldDef{}, rels: map[string]*fieldDef{}}
	for _, spec := range def.Fields {
		parts := strings.Split(spec, ":")
		t, ok := fieldTypeNames[parts[1]]
		if !ok {
			panic(fmt.Sprintf("simsf: bad field spec %q", spec))
		}
		f := &fieldDef{Name: parts[0], Type: t, Custom: strings.HasSuffix(parts[0], "__c")}
		if t == typeReference {
			f.RefTo = parts[2]
			if len(parts) > 3 {
				f.RelName = parts[3]
			}
		}
		switch t {
		case typeID, typeReference:
			f.Length = 18
		case typeString, typePicklist:
			f.Length = 255
		case typeTextArea:
			f.Length = 131072
		}
		o.fields = append(o.fields, f)
		o.byLower[strings.ToLower(f.Name)] = f
		if f.RelName != "" {
			o.rels[strings.ToLower(f.RelName)] = f
		}
	}
	return o
}

func (o *object) queryable() bool { return o.def.Kind != kindPlatformEvent }
func (o *object) isBig() bool     { return o.def.Kind == kindBig }
func (o *object) custom() bool    { return o.def.Kind == kindCustom || strings.HasSuffix(o.name, "__e") }

// onSurface reports whether the object is served by the data (tooling=false)
// or the Tooling (tooling=true) API.
func (o *object) onSurface(tooling bool) bool {
	switch o.def.Surface {
	case surfaceBoth:
		return true
	case surfaceTooling:
		return tooling
	default:
		return !tooling
	}
}
